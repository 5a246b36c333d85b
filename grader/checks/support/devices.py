"""The device a check grades on: a real accelerator, or the stand-in on a CPU-only machine.

Both expose the same small surface (``device``, ``mode``, ``events``, ``live_bytes()``) so
that a check is written once. On a real GPU the events are recorded by wrapping the
synchronize/clock/cache functions and counting matmuls; on the stand-in they come from the
emulation itself.
"""

from __future__ import annotations

import contextlib
import os
import time
import timeit
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from grader.checks.support.patching import patched
from grader.checks.support.standin import ARITHMETIC, MATMULS, Event, StandIn


class Accelerator(Protocol):
    device: torch.device
    mode: str  # "cuda" | "mps" | "standin"
    virtual: bool  # timings and memory follow the stand-in's deterministic model
    events: list[Event]

    def live_bytes(self) -> int: ...
    def fill_capacity(self, chunk_bytes: int) -> int: ...
    def __enter__(self) -> Accelerator: ...
    def __exit__(self, *exc: object) -> None: ...


GPU_SHARE_VAR = "GRADER_GPU_SHARE"
_perf_counter = time.perf_counter  # the real clock, whatever a check patches later


def gpu_share() -> float:
    """The fraction of the GPU's memory this grading process may use (batch workers split it)."""
    try:
        return min(max(float(os.environ.get(GPU_SHARE_VAR, "1")), 0.05), 1.0)
    except ValueError:
        return 1.0


def apply_gpu_share() -> None:
    if torch.cuda.is_available() and gpu_share() < 1.0:
        torch.cuda.set_per_process_memory_fraction(gpu_share())


def real_accelerator_type() -> str | None:
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return None


# GradScaler runs on MPS from torch 2.8 (pytorch/pytorch#150255); before, its unscale step
# casts to float64, which MPS lacks.
MPS_GRAD_SCALER_TORCH = (2, 8)


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def runs_amp(mode: str, dtype: torch.dtype) -> bool:
    """Whether a device of this mode runs autocast in ``dtype`` (float16: with GradScaler).

    A check never demands what the hardware cannot do: where this is False the check grades on
    the stand-in instead (a T4 has no fast bfloat16; an MPS before macOS 14 has no bfloat16).
    """
    if mode == "cuda":
        return dtype != torch.bfloat16 or bool(torch.cuda.is_bf16_supported())
    if mode == "mps":  # untested: no Mac has run this yet
        if dtype == torch.bfloat16:
            newer = getattr(torch.backends.mps, "is_macos_or_newer", None)
            return newer is not None and bool(newer(14, 0))
        return _torch_version() >= MPS_GRAD_SCALER_TORCH
    return True


def holds_dtype(mode: str, dtype: torch.dtype) -> bool:
    """Whether tensors of ``dtype`` can live on a device of this mode (MPS has no float64)."""
    return not (mode == "mps" and dtype == torch.float64)


class RealAccelerator:
    """Records what the learner's code does on a real CUDA or MPS device."""

    virtual = False

    def __init__(self, kind: str, budget_bytes: int | None = None) -> None:
        self.device = torch.device(kind)
        self.mode = kind
        self.events: list[Event] = []
        self.budget = budget_bytes
        self._stack = contextlib.ExitStack()
        self._backend: Any = torch.cuda if kind == "cuda" else torch.mps
        # Taken before the learner-facing functions are wrapped: recording must not record itself.
        self._allocated = torch.cuda.memory_allocated if kind == "cuda" else torch.mps.current_allocated_memory
        self._empty_cache = self._backend.empty_cache

    def live_bytes(self) -> int:
        return int(self._allocated())

    def fill_capacity(self, chunk_bytes: int) -> int:
        """How many float32 chunks fit under the memory cap, measured by filling it once.

        The caching allocator reserves whole segments (20 MiB for a 4 MiB chunk), and the cap
        counts reserved memory, so the count is measured, not derived from the budget.
        """
        numel = chunk_bytes // 4
        held: list[torch.Tensor] = []
        try:
            while len(held) < 10_000:
                held.append(torch.empty(numel, dtype=torch.float32, device=self.device))
        except torch.OutOfMemoryError:
            pass
        count = len(held)
        held.clear()
        self._empty_cache()
        return count

    def record(self, kind: str, device: str = "", dtype: str = "") -> None:
        self.events.append(Event(kind, device or self.mode, _perf_counter(), self.live_bytes(), dtype))

    def _wrap(self, kind: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = func(*args, **kwargs)
            self.record(kind)
            return result

        return wrapper

    def _patches(self) -> dict[tuple[object, str], object]:
        targets: list[tuple[object, str, str]] = [
            (self._backend, "synchronize", "sync"),
            (self._backend, "empty_cache", "empty_cache"),
            (time, "time", "clock"),
            (time, "perf_counter", "clock"),
            (time, "perf_counter_ns", "clock"),
            (time, "monotonic", "clock"),
            (timeit, "default_timer", "clock"),
        ]
        if self.mode == "cuda":
            targets.append((torch.cuda, "memory_allocated", "memory_read"))
        accel = getattr(torch, "accelerator", None)
        if accel is not None:
            targets.append((accel, "synchronize", "sync"))
        return {(obj, attr): self._wrap(kind, getattr(obj, attr)) for obj, attr, kind in targets if hasattr(obj, attr)}

    def __enter__(self) -> RealAccelerator:
        self._backend.synchronize()
        self._backend.empty_cache()
        if self.budget is not None and self.mode == "cuda":
            # The OOM exercise then fails in seconds and never starves other GPU users.
            total = torch.cuda.get_device_properties(self.device).total_memory
            # The cap counts reserved memory (whole segments), not only live tensors.
            fraction = min(gpu_share(), (torch.cuda.memory_reserved() + self.budget) / total)
            torch.cuda.set_per_process_memory_fraction(fraction)
            self._stack.callback(torch.cuda.set_per_process_memory_fraction, gpu_share())
        elif self.budget is not None and self.mode == "mps":  # untested: no Mac has run this yet
            limit = torch.mps.recommended_max_memory()
            torch.mps.set_per_process_memory_fraction((torch.mps.current_allocated_memory() + self.budget) / limit)
            self._stack.callback(torch.mps.set_per_process_memory_fraction, 0.0)
        self._stack.enter_context(patched(self._patches()))
        self._stack.enter_context(_MatmulRecorder(self))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


class _MatmulRecorder(TorchFunctionMode):
    def __init__(self, owner: RealAccelerator) -> None:
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        first = next((t for t in tree_leaves(out) if isinstance(t, torch.Tensor)), None)
        if first is None:
            return out
        if name in MATMULS:
            self.owner.record("matmul", first.device.type, str(first.dtype))
        elif name in ARITHMETIC:
            self.owner.record("op", first.device.type, str(first.dtype))
        elif name in ("to", "cuda") and args and isinstance(args[0], torch.Tensor) \
                and args[0].device.type == "cpu" and first.device.type != "cpu":
            self.owner.record("h2d", first.device.type)
        return out


class StandInAccelerator(StandIn):
    mode = "standin"
    virtual = True

    def live_bytes(self) -> int:
        return self.meter.live_bytes()

    def fill_capacity(self, chunk_bytes: int) -> int:
        return (self.meter.budget or 0) // chunk_bytes


def open_accelerator(forced: str | None, *, virtual_clock: bool = False, budget_bytes: int | None = None,
                     real_ok: Callable[[str], bool] = lambda mode: True) -> Accelerator:
    """The real accelerator when there is one (and the grader may use it), else the stand-in.

    ``real_ok(mode)`` False: this check cannot grade fairly on that device (bfloat16 on a T4,
    the untyped OOM of MPS), so it grades on the stand-in, and its report says so.
    """
    kind = real_accelerator_type() if forced in (None, "auto", "cuda", "mps") else None
    if forced in ("cuda", "mps") and kind != forced:
        kind = None
    if kind is not None and real_ok(kind):
        return RealAccelerator(kind, budget_bytes)
    return StandInAccelerator(virtual_clock=virtual_clock, budget_bytes=budget_bytes)
