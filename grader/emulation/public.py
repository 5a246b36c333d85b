"""``grader.emulated()``: run code on a stand-in accelerator, in a notebook or a script.

The grader's own stand-in (grader/emulation/standin.py), for learners without a GPU ("try your CUDA
code on your laptop") and for course authors writing checks: inside ``with grader.emulated("cuda"):``
``torch.cuda.is_available()`` is True, tensors and modules go to ``"cuda"``, mixing devices raises
PyTorch's own error, autocast follows CUDA's policy, ``torch.cuda`` answers as a single-GPU machine
does — and, with ``virtual_clock=True``, every clock reads the virtual timeline, so that a timing
without ``synchronize()`` shows the same wrong number it would on a GPU.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import torch

from grader.emulation.patching import LearnerCode
from grader.emulation.standin import StandIn
from grader.reference.device import CostModel
from grader.wire.messages import Event


@dataclass(frozen=True)
class Emulated:
    """What ``with grader.emulated(...) as gpu:`` gives: the device, and what happened on it."""

    standin: StandIn

    @property
    def device(self) -> torch.device:
        return self.standin.device

    @property
    def events(self) -> list[Event]:
        """What the code did on the device, in order: products, transfers, synchronizes, clock reads."""
        return list(self.standin.events)

    @property
    def elapsed(self) -> float:
        """Virtual seconds the host has spent since the stand-in started."""
        return self.standin.timeline.host

    def memory_allocated(self) -> int:
        return self.standin.live_bytes()

    def max_memory_allocated(self) -> int:
        return self.standin.peak


@contextmanager
def emulated(kind: Literal["cuda", "mps"] = "cuda", *, virtual_clock: bool = False,
             memory_bytes: int | None = None, costs: CostModel | None = None) -> Iterator[Emulated]:
    """Run the block on a stand-in ``kind`` GPU (``"cuda"``, or ``"mps"``: an Apple GPU).

    ``virtual_clock``: every clock reads the stand-in's virtual timeline (deterministic timings);
    ``memory_bytes``: the device's memory, past which an allocation raises its out-of-memory error;
    ``costs``: the timeline's cost model (grader/reference/device.py's ``CostModel``).
    Names the calling module holds (``from time import perf_counter``) are patched there too.
    """
    if kind not in ("cuda", "mps"):
        raise ValueError(f"grader.emulated: kind must be 'cuda' or 'mps', not {kind!r}")
    code = _Caller(sys._getframe(2).f_globals)  # the module of the `with` (a contextmanager: 2 frames up)
    with StandIn(kind, costs=costs, virtual_clock=virtual_clock, budget_bytes=memory_bytes, code=code) as standin:
        yield Emulated(standin)



@dataclass(frozen=True)
class _Caller(LearnerCode):
    """The calling module's globals (a notebook's ``__main__`` has no file to find it by)."""

    caller: dict[str, Any] | None = None

    def __init__(self, caller: dict[str, Any]) -> None:
        object.__setattr__(self, "dirs", ())
        object.__setattr__(self, "caller", caller)

    def namespaces(self) -> list[dict[str, Any]]:
        return [self.caller] if self.caller is not None else []
