"""What the learner process measured, checked before a check reads it (issue 22).

The instruments that watch the learner's code — the device events, the memory meter, the
GradScaler counters — run in the learner process, beside the learner's code, so code that goes
looking can rewrite them (tests/forgery_corpus.py). The judge cannot see inside that process, but
it can refuse what cannot be true:

- every figure is validated as it is decoded: a known name, the right type (an ``int`` is not a
  ``bool`` nor a string), finite, within a range that one call can reach;
- a stand-in's events form one timeline: the host's virtual time never goes back, the time the
  device's queue drains (``busy_until``) never goes back, a kernel the host launched leaves the
  queue busy past the launch, ``drained`` is what host and queue say it is, and each clock reads
  its own fixed origin plus the host's time (grader/emulation/clocks.py ``VirtualClocks``).

What fails is ``Tampered`` — the learner's ``error``, with the report noted ``tampering`` — never
the grader's own error. What stays forgeable (a rewrite that keeps every one of these rules) is
written down in the README's "Security model" and held by strict xfail tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from grader.judge.outcomes import Tampered
from grader.wire.messages import Event

# One call's counters: a loop of the course's size makes a few hundred calls at most.
MAX_COUNT = 1_000_000
# A peak of live tensors: no process of the course's memory limit holds more than 2**48 bytes.
MAX_BYTES = 1 << 48
COUNTERS = ("scale", "step", "update", "disabled", "optimizer_steps")
# What watch_amp may name (grader/learner/instruments.py): the deprecated AMP classes.
DEPRECATED = frozenset(f"torch.{where}.amp.{name}" for where in ("cuda", "cpu") for name in ("autocast", "GradScaler"))
# How far a virtual clock's reading may stray from its origin + the host's time: float rounding of
# an epoch-sized clock (time.time() ~1.8e9 s has a resolution of 2.4e-7 s) and nanosecond clocks.
CLOCK_SLACK_S = 1e-5


def count(measured: Mapping[str, Any], name: str) -> int:
    """One counter of a call's figures: a non-negative int within reach of one call, else Tampered."""
    value = measured.get(name, 0)
    if type(value) is not int or not 0 <= value <= (MAX_BYTES if name == "peak" else MAX_COUNT):
        raise Tampered("tampered.figure", name=name, value=str(value)[:40])
    return value


def deprecated(measured: Mapping[str, Any]) -> list[str]:
    names = measured.get("deprecated", [])
    if type(names) not in (list, tuple) or len(names) > len(DEPRECATED) or not all(
            type(n) is str and n in DEPRECATED for n in names):
        raise Tampered("tampered.figure", name="deprecated", value=str(names)[:60])
    return list(names)


def figures(measured: Mapping[str, Any]) -> dict[str, Any]:
    """A call's figures (``Returned.measured``), every one validated; unknown names are Tampered."""
    unknown = set(measured) - {"peak", "deprecated", *COUNTERS}
    if unknown:
        raise Tampered("tampered.unknown_figures", names=", ".join(sorted(str(n) for n in unknown)[:3]))
    found: dict[str, Any] = {name: count(measured, name) for name in ("peak", *COUNTERS)}
    found["deprecated"] = deprecated(measured)
    return found


def _finite(event: Event) -> None:
    numbers = (event.host, event.value, event.busy_until or 0.0)
    if not all(math.isfinite(x) for x in numbers) or not 0 <= event.live_bytes <= MAX_BYTES:
        raise Tampered("tampered.event_figures", kind=event.kind)


@dataclass
class StandInTimeline:
    """A stand-in session's events, as they arrive with each answer, held to one virtual timeline."""

    device: str  # "cuda" / "mps": the stand-in's own device type
    host: float = 0.0
    busy_until: float = 0.0
    origins: dict[str, float] = field(default_factory=dict)  # each clock's reading minus the host's time

    def heard(self, events: tuple[Event, ...]) -> None:
        for event in events:
            self._one(event)

    def _one(self, event: Event) -> None:
        _finite(event)
        if event.busy_until is None or event.drained is None:
            raise Tampered("tampered.event_untimed", kind=event.kind)
        if event.host < self.host or event.busy_until < self.busy_until:
            raise Tampered("tampered.event_earlier", kind=event.kind)
        if event.drained != (event.host >= event.busy_until):
            if event.drained:
                raise Tampered("tampered.event_idle", kind=event.kind)
            raise Tampered("tampered.event_busy", kind=event.kind)
        if event.kind == "matmul" and event.device == self.device and event.busy_until <= event.host:
            raise Tampered("tampered.matmul_not_queued")
        if event.kind == "clock" and not event.source.endswith(".Event"):
            origin = event.value - event.host
            known = self.origins.setdefault(event.source, origin)
            if abs(origin - known) > CLOCK_SLACK_S * max(1.0, abs(known) * 1e-9):
                raise Tampered("tampered.clock_off_timeline", clock=event.source)
        self.host, self.busy_until = event.host, event.busy_until


def real_events(events: tuple[Event, ...]) -> None:
    """A real device's or the CPU's events: only that their figures are numbers (their times are
    the machine's own, which the judge cannot replay)."""
    for event in events:
        _finite(event)
