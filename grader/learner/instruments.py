"""What a call can be measured with, besides the device's events: the peak of live tensors (and a
memory budget), how the learner's GradScaler was used, and how many optimizer steps it took. The
figures go back in ``Returned.measured``; the judge reads them as grader/judge/proxy.py ``Figures``."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from grader.reference.meter import MemoryMeter


@dataclass
class ScalerCalls:
    """What the learner's GradScaler did: calls of an enabled scaler, and of a disabled one (a
    GradScaler("cuda") on another device turns itself off and scales nothing)."""

    scale: int = 0
    step: int = 0
    update: int = 0
    disabled: int = 0
    deprecated: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        return {"scale": self.scale, "step": self.step, "update": self.update, "disabled": self.disabled,
                "deprecated": sorted(set(self.deprecated))}


@contextlib.contextmanager
def watch_amp() -> Iterator[ScalerCalls]:
    """Count GradScaler calls and any use of the deprecated torch.cuda.amp / torch.cpu.amp classes."""
    calls = ScalerCalls()
    saved: list[tuple[type, str, Any]] = []
    scaler = torch.amp.GradScaler
    for name in ("scale", "step", "update"):
        original = getattr(scaler, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            if self.is_enabled():
                setattr(calls, _name, getattr(calls, _name) + 1)
            else:
                calls.disabled += 1
            return _original(self, *args, **kwargs)

        saved.append((scaler, name, original))
        setattr(scaler, name, counted)
    for where, cls_name in (("cuda", "autocast"), ("cuda", "GradScaler"), ("cpu", "autocast"), ("cpu", "GradScaler")):
        cls = getattr(getattr(getattr(torch, where), "amp", None), cls_name, None)
        if cls is None:
            continue
        original_init = cls.__init__

        def init(self, *args, _name=f"torch.{where}.amp.{cls_name}", _original=original_init,  # type: ignore[no-untyped-def]
                 **kwargs):
            calls.deprecated.append(_name)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _original(self, *args, **kwargs)

        saved.append((cls, "__init__", original_init))
        cls.__init__ = init
    try:
        yield calls
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


@contextlib.contextmanager
def metered(budget: int | None, label: str, counters: list[MemoryMeter] | None) -> Iterator[MemoryMeter]:
    """Live tensors counted for the call's duration; past ``budget`` bytes, out of memory.
    ``counters``: the open session's meters (its dispatch mode counts for each, after its own
    accounting, grader/reference/meter.py ``counted``); ``None``: no session, the meter is a dispatch
    mode of its own."""
    meter = MemoryMeter(budget, label)
    if counters is None:
        with meter:
            yield meter
        return
    counters.append(meter)
    try:
        yield meter
    finally:
        counters.remove(meter)


@contextlib.contextmanager
def counted_steps() -> Iterator[dict[str, int]]:
    """Count ``optimizer.step()`` calls for the call's duration, through torch's global step hook:
    every optimizer counts, a learner's own subclass and a GradScaler's step included (a step the
    scaler skips for an inf gradient does not run, and does not count)."""
    counts = {"optimizer_steps": 0}

    def counted(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        counts["optimizer_steps"] += 1

    handle = register_optimizer_step_post_hook(counted)
    try:
        yield counts
    finally:
        handle.remove()
