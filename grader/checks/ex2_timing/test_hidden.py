"""Exercise 2, hidden checks: synchronize, warm-up, mean, no copies in the timed loop.

On a machine without a GPU these run on the stand-in (grader/checks/support/standin.py),
whose kernels are asynchronous on a virtual timeline read by the learner's clock, so each
timing mistake shows exactly as it would on a real GPU, and the figures are deterministic:
a loaded machine cannot change them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.support.devices import Accelerator
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail
from grader.checks.support.standin import Event
from grader.checks.support.trusted import is_number

N = 512  # stand-in: 268 µs a matmul (see CostModel); real GPUs: still cheap
REPEATS = 5
# Stand-in: a correct mean reads 270 µs (ratio 1.01: launch overhead); without warm-up 6.3 ms
# (23x), total instead of mean 5x, copies inside the loop 1.65x, no synchronize 0.04x.
MEAN_TOLERANCE = (0.8, 1.25)
# A real GPU: the mean of 8 repeats vs 2 repeats stays near 1 when it is a mean, 4 when it is
# a total. 2.2 is NOT yet measured (no GPU has run these checks): benchmarks/validate_gpu.py
# will show whether the correct styles stay clear of it; adjust it from that table.
REAL_TOTAL_RATIO = 2.2


def _timed(ex2: LearnerModule, acc: Accelerator, n: int = N, repeats: int = REPEATS) -> tuple[float, list[Event]]:
    first = len(acc.events)
    seconds = ex2.time_matmul(n, acc.device, repeats=repeats)
    if isinstance(seconds, torch.Tensor) or not is_number(seconds) or seconds <= 0:
        fail("ex2.not_seconds", got=repr(seconds)[:60])
    return float(seconds), acc.events[first:]


def _clock_reads(events: list[Event]) -> list[int]:
    return [i for i, e in enumerate(events) if e.kind == "clock"]


def test_synchronizes_before_reading_clock(ex2: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with accel(virtual_clock=True) as acc:
        _, events = _timed(ex2, acc)
    clocks = _clock_reads(events)
    matmuls = [i for i, e in enumerate(events) if e.kind == "matmul"]
    if not clocks or not matmuls:
        return  # CUDA events: elapsed_time itself demands a synchronize (checked by the value)
    stop = clocks[-1]
    last_matmul = max(i for i in matmuls if i < stop) if any(i < stop for i in matmuls) else None
    if last_matmul is not None and not any(e.kind == "sync" for e in events[last_matmul:stop]):
        fail("ex2.no_sync_before_stop")
    start = clocks[0]
    before_start = [i for i in matmuls if i < start]
    if before_start and not any(e.kind == "sync" for e in events[before_start[-1]:start]):
        fail("ex2.no_sync_before_start")


def test_warms_up(ex2: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with accel(virtual_clock=True) as acc:
        _, events = _timed(ex2, acc)
    clocks = _clock_reads(events)
    if clocks and not any(e.kind == "matmul" for e in events[: clocks[0]]):
        fail("ex2.no_warmup")


def test_returns_mean_not_total(ex2: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with accel(virtual_clock=True) as acc:
        if acc.virtual:
            seconds, _ = _timed(ex2, acc)
            expected = acc.matmul_seconds(N)  # type: ignore[attr-defined]
            ratio = seconds / expected
            low, high = MEAN_TOLERANCE
            if abs(ratio - REPEATS) < 0.5:
                fail("ex2.total_not_mean", ratio=f"{ratio:.1f}", repeats=REPEATS)
            if ratio > high:
                fail("ex2.too_slow", got=f"{seconds * 1e6:.0f} µs", expected=f"{expected * 1e6:.0f} µs")
            if ratio < low:
                fail("ex2.too_fast", got=f"{seconds * 1e6:.0f} µs", expected=f"{expected * 1e6:.0f} µs")
        else:
            _timed(ex2, acc, 2048, 2)  # warm the library for this size
            two, _ = _timed(ex2, acc, 2048, 2)
            eight, _ = _timed(ex2, acc, 2048, 8)
            if eight / two > REAL_TOTAL_RATIO:
                fail("ex2.total_not_mean", ratio=f"{eight / two:.1f}", repeats="8/2")


def test_tensors_created_on_device(ex2: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with accel(virtual_clock=True) as acc:
        _, events = _timed(ex2, acc)
    clocks = _clock_reads(events)
    window = events[clocks[0]: clocks[-1]] if len(clocks) >= 2 else []
    if any(e.kind == "h2d" for e in window):
        fail("ex2.copies_in_loop")
    if not any(e.kind == "matmul" and e.device == acc.device.type for e in events):
        fail("ex2.not_on_device", device=acc.device)


def test_speedup_consistent(ex2: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    """speedup() against the learner's own time_matmul, so a timing mistake is not charged twice."""
    with accel(virtual_clock=True) as acc:
        ratio = ex2.speedup(N, acc.device, repeats=3)
        virtual = acc.virtual
    if isinstance(ratio, torch.Tensor) or not is_number(ratio) or ratio <= 0:
        fail("ex2.speedup_not_number", got=repr(ratio)[:60])
    if virtual:  # deterministic: a fresh stand-in replays the learner's own timings exactly
        with accel(virtual_clock=True) as acc:
            cpu_time = ex2.time_matmul(N, torch.device("cpu"), repeats=3)
            device_time = ex2.time_matmul(N, acc.device, repeats=3)
        if not (is_number(cpu_time) and is_number(device_time) and device_time > 0):
            return  # time_matmul's own checks report this
        expected = cpu_time / device_time
        if not 0.9 < ratio / expected < 1.1:
            fail("ex2.speedup_inconsistent", got=f"{ratio:.2f}", expected=f"{expected:.2f}")
