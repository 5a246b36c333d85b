"""Exercise 2's helpers: timing the learner's time_matmul(), and finding what its number measured.

A correct ``time_matmul`` may read the clock many times — timm's benchmark loop times its warm-up
and throws that figure away; ``torch.utils.benchmark.Timer`` warms up inside ``timeit``; CUDA
events time on the device — so the checks judge the *interval that produced the returned value*:
the two clock reads (of the same clock) whose difference, over ``repeats`` or over one run, is
the number returned. The warm-up must come before that interval, the device must be idle when
its clock reads happen, and no copy may run inside it. When no pair of reads explains the number,
the first and the last clock reads stand for it, as a stopwatch around the whole call would.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grader.judge.api import Device, Event, LearnerModule, Smaller, fail, is_number

N = 512  # the size a grading draws around (grader/reference/draws.py: 384-640); stand-in: 268 µs at 512
REPEATS = 5
# A stand-in times the learner's code on problems a quarter of the drawn side, on a cost model that reads
# the drawn size's times (grader/reference/device.py ``CostModel.smaller``): every product, copy and
# elementwise op, mistakes and margins as at n (the same virtual times to the bit: the factors are powers of
# two), for a 64th of the real arithmetic. Half the side (an eighth) left the products of ex2's 13 calls
# ~30 ms of a batch learner's CPU (2026-12-06); the drawn sizes (384-640) are multiples of 64. A real device
# and the CPU's own clock time the drawn size.
SMALLER: Smaller = 4
UNITS = {1.0: "s", 1e3: "ms", 1e6: "µs"}
MATCH = 1e-2  # how close (relative) a clock difference must be to the returned value; time.time() rounds
# On a real device, how close in seconds (and 1e-9 relative): the returned number is the learner's
# arithmetic on the very values recorded, off only by a nanosecond clock's rounding at each end
# (time.perf_counter_ns()). A relative MATCH there let pairs that hold a timed warm-up explain timm's
# sum of per-step times by chance — a real machine reads its clocks many times, with gaps between (an
# H200 failed timm's runner for "no warm-up" so, 2 gradings in 36). A datetime's microseconds, or
# time.time_ns() (the epoch's seconds as recorded, a float, step 2.4e-7 s), explain nothing there: such a
# number is judged as one no pair gives (each check says how).
REAL_SLACK_S = 2e-9
MESSAGES = {
    "ex2.not_seconds": {
        "vi": "time_matmul() phải trả về thời gian trung bình (giây) dạng float, nhận được {got}.",
        "en": "time_matmul() must return the mean time in seconds as a float, got {got}.",
    },
    "ex2.not_measured": {
        "vi": "time_matmul() trả về một số mà không cặp lần đọc đồng hồ nào quanh các matmul cho ra: hãy trả về hiệu "
              "của hai lần đọc đồng hồ (chia cho repeats), đừng tính hay ước lượng thời gian.",
        "en": "time_matmul() returned a number that no two clock readings around the matmuls give: return the "
              "difference of two clock readings (divided by repeats), not a time computed or estimated otherwise.",
    },
    "ex2.not_seconds_unit": {
        "vi": "time_matmul() trả về {got}, tức thời gian đo được tính bằng {unit}: hãy trả về giây (bỏ phép nhân "
              "với {factor}).",
        "en": "time_matmul() returned {got}, which is the time it measured in {unit}: return seconds (drop the "
              "multiplication by {factor}).",
    },
}


# Where no one pair gives the number on a real device, a run of steps may, each timed by its own two
# reads and the times summed: timm's runner adds up its steps' perf_counter differences, the
# torch.compile tutorial's timed() helper times each call with a pair of CUDA events. Exact there (the
# learner's own sum of the recorded values, in order), so no run matches by chance; searched among at
# most this many reads of one clock (the runs are quadratic in them).
STEP_READS_MAX = 256


@dataclass(frozen=True)
class Interval:
    """What the returned number measured: events[start] to events[stop], two reads of one clock (on a
    real device also the first and last reads of a run of steps whose times were summed: ``steps``)."""

    start: int
    stop: int
    unit: float = 1.0  # 1e3: the number is in milliseconds
    found: bool = True  # False: no pair explained the number; the first and last reads stand for it
    device_clock: bool = False  # two CUDA / MPS events: device time, which needs no host synchronize
    per_repeat: bool = False  # the difference was divided by ``repeats`` (a mean), not returned whole
    steps: int = 1  # how many pairs of reads, each around one step, were summed (real devices)


def seconds_of(value: object) -> float:
    """What time_matmul returned, as a number of seconds; anything else is its mistake."""
    if isinstance(value, torch.Tensor) or not is_number(value) or value <= 0:
        fail("ex2.not_seconds", got=repr(value)[:60])
    return float(value)


def timed(ex2: LearnerModule, dev: Device, n: int, repeats: int = REPEATS) -> tuple[float, list[Event]]:
    """time_matmul on ``dev`` (inside ``with dev:``) of a problem drawn at ``n`` (run at ``dev.size(n)``):
    the number returned and what happened meanwhile."""
    first = len(dev.events)
    seconds = seconds_of(ex2.time_matmul(dev.size(n), dev.device, repeats=repeats))
    return seconds, dev.events[first:]


def clock_reads(events: list[Event]) -> list[int]:
    return [i for i, e in enumerate(events) if e.kind == "clock"]


def measured_interval(events: list[Event], seconds: float, repeats: int, *, real: bool) -> Interval | None:
    """The clock reads whose difference is the returned number (a mean over ``repeats``, or one
    run; in seconds, milliseconds or microseconds): in seconds if possible, then the pair with the
    most matmuls inside. Else the first and last reads; None when no clock was read."""
    candidates = explanations(events, seconds, repeats, real=real)
    if candidates:
        return candidates[0]
    # A stopwatch around the call reads the host's clocks: a device event (which needs no synchronize
    # before it) is not one — nor one the learner never asked the elapsed time of.
    clocks = [i for i in clock_reads(events) if ".Event" not in events[i].source]
    return Interval(clocks[0], clocks[-1], found=False) if clocks else None


def _gives(seconds: float, span: float, unit: float, divisor: int, real: bool) -> bool:
    """Whether ``span`` seconds, over ``divisor`` and in ``unit``, is the returned number."""
    if real:
        return abs(seconds * divisor / unit - span) <= REAL_SLACK_S + 1e-9 * span
    return abs(seconds / (span * unit / divisor) - 1.0) < MATCH


def explanations(events: list[Event], seconds: float, repeats: int, *, real: bool) -> list[Interval]:
    """Every pair of reads of one clock whose difference, whole or over ``repeats``, is the returned
    number, best first (in seconds, then the most matmuls inside, then the widest): within ``MATCH``
    on a stand-in's timeline, within ``REAL_SLACK_S`` on a real device's clocks (``real``)."""
    clocks = clock_reads(events)
    candidates: list[tuple[tuple[bool, int, int], Interval]] = []
    for a, i in enumerate(clocks):
        for j in clocks[a + 1:]:
            if events[i].source != events[j].source:
                continue
            span = events[j].value - events[i].value
            if span > 0:
                candidates += _giving(events, seconds, repeats, start=i, stop=j, span=span, real=real)
    if real:
        candidates += _step_runs(events, seconds, repeats)
    return [interval for _, interval in sorted(candidates, key=lambda candidate: candidate[0], reverse=True)]


def _step_runs(events: list[Event], seconds: float, repeats: int) -> list[tuple[tuple[bool, int, int], Interval]]:
    """On a real device: runs of two or more consecutive steps, each between two reads of one clock
    (read, work, read), whose times summed — over ``repeats`` or whole — give the returned number."""
    by_source: dict[str, list[int]] = {}
    for i in clock_reads(events):
        by_source.setdefault(events[i].source, []).append(i)
    candidates: list[tuple[tuple[bool, int, int], Interval]] = []
    for reads in by_source.values():
        if len(reads) > STEP_READS_MAX:
            continue
        for first in range(len(reads) - 3):
            total = 0.0
            for k in range(first, len(reads) - 1, 2):
                span = events[reads[k + 1]].value - events[reads[k]].value
                if span <= 0:
                    break
                total += span
                if k > first:  # one step is a pair: explanations' own
                    candidates += _giving(events, seconds, repeats, start=reads[first], stop=reads[k + 1],
                                          span=total, real=True, steps=(k - first) // 2 + 1)
    return candidates


def _giving(events: list[Event], seconds: float, repeats: int, *, start: int, stop: int, span: float,
            real: bool, steps: int = 1) -> list[tuple[tuple[bool, int, int], Interval]]:
    """The intervals from events[start] to events[stop] whose ``span`` seconds (one pair's difference, or
    a run's summed steps), in a unit and over ``repeats`` or whole, give the returned number; each with
    its rank (in seconds, the matmuls inside, the width)."""
    found = []
    for unit in UNITS:
        for divisor in dict.fromkeys((repeats, 1)):
            if _gives(seconds, span, unit, divisor, real):
                inside = sum(1 for e in events[start:stop] if e.kind == "matmul")
                interval = Interval(start, stop, unit, device_clock=events[start].source.endswith(".Event"),
                                    per_repeat=divisor > 1, steps=steps)
                found.append(((unit == 1.0, inside, stop - start), interval))
    return found


def interval_of(events: list[Event], seconds: float, dev: Device, repeats: int = REPEATS) -> Interval | None:
    """The interval the returned number measured. On a stand-in every clock reads the virtual
    timeline, so the number a timing returns IS two readings' difference (over ``repeats``, or one
    run, in s/ms/µs): one that no pair of readings gives was not measured — computed from the
    cost model, pasted, scaled — and fails here, whatever else it matches. A real device's clocks
    are the machine's own (a median of several runs is no single pair): there, as found."""
    interval = measured_interval(events, seconds, repeats, real=not dev.virtual)
    if dev.virtual and (interval is None or not interval.found):
        fail("ex2.not_measured", device=dev.label)
    return interval


def device_matmuls(events: list[Event], dev: Device) -> list[int]:
    return [i for i, e in enumerate(events) if e.kind == "matmul" and e.device == dev.device.type]
