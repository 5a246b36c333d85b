"""The devices a check grades on: the CPU, and each accelerator kind, real or stand-in.

A learner's function can be handed the CPU, CUDA or MPS, so a check runs it on each kind it
names — ``for dev in devices("cpu", "cuda", "mps"):`` — and a mistake confined to one device
(autocast only when ``device.type == "cuda"``, ``torch.cuda.synchronize()`` on an Apple GPU)
loses the points with a message naming that device. An accelerator kind is the real device
when the machine has it (and the check can judge fairly there, ``real_ok``), else its stand-in
on the CPU (grader/checks/support/standin.py).

Every device exposes the same small surface (``device``, ``mode``, ``label``, ``virtual``,
``events``, ``live_bytes()``, ``fill_capacity()``) so that a check is written once. On the CPU
and on a real GPU the events are recorded by wrapping the synchronize/clock/cache functions and
watching the ops; on a stand-in they come from the emulation itself. A check's failure inside
``with dev:`` is labelled with the device, so its message says where it happened.
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

from grader.checks.support.meter import MemoryMeter
from grader.checks.support.outcomes import CheckFailed, LearnerRaised
from grader.checks.support.patching import Target, Wrap, kept_original, patched
from grader.checks.support.standin import ARITHMETIC, MATMULS, Event, Kind, StandIn

KINDS = ("cpu", "cuda", "mps")


class Device(Protocol):
    device: torch.device
    mode: str  # "cpu" | "cuda" | "mps" | "standin"
    label: str  # "cpu", "cuda (stand-in)", "cuda (NVIDIA H200)"
    virtual: bool  # timings and memory follow the stand-in's deterministic model
    events: list[Event]

    def live_bytes(self) -> int: ...
    def fill_capacity(self, chunk_bytes: int) -> int: ...
    def __enter__(self) -> Device: ...
    def __exit__(self, *exc: object) -> None: ...


Accelerator = Device  # the name the checks used before every device was graded

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
    """Whether a real device of this mode runs autocast in ``dtype`` (float16: with GradScaler).

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


def holds_dtype(device: Device, dtype: torch.dtype) -> bool:
    """Whether tensors of ``dtype`` can live on this device (MPS, real or stand-in, has no float64)."""
    return not (device.device.type == "mps" and dtype == torch.float64)


class _Labelled:
    """Tells the report where the check ran, and labels a check's failure inside ``with dev:`` with
    the device, for its message."""

    label: str
    on_enter: Callable[[], None] | None = None  # set by the checks' fixture: this device was graded on

    def entered(self) -> None:
        if self.on_enter is not None:
            self.on_enter()

    def label_failure(self, exc: object) -> None:
        if isinstance(exc, (CheckFailed, LearnerRaised)):
            exc.params.setdefault("device", self.label)


class _Recorder(TorchFunctionMode):
    """Watches the ops of the learner's code on a real device (or the CPU) for the checks."""

    def __init__(self, owner: _Watched) -> None:
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
        elif name in ("to", "cuda") and args and isinstance(args[0], torch.Tensor):
            source, target = args[0].device.type, first.device.type
            if source == "cpu" and target != "cpu":
                self.owner.record("h2d", target)
            elif source != "cpu" and target == "cpu":
                blocking = not (kwargs or {}).get("non_blocking", False)
                self.owner.record("d2h" if blocking else "d2h_async", target)
        return out


class _Watched(_Labelled):
    """A real device (the CPU, a real GPU): its functions wrapped to record what the learner does."""

    virtual = False

    def __init__(self, kind: str, budget_bytes: int | None) -> None:
        self.device = torch.device(kind)
        self.events: list[Event] = []
        self.budget = budget_bytes
        self._stack = contextlib.ExitStack()

    def live_bytes(self) -> int:
        raise NotImplementedError

    def record(self, kind: str, device: str = "", dtype: str = "", value: float = 0.0, source: str = "") -> None:
        self.events.append(Event(kind, device or self.device.type, _perf_counter(), self.live_bytes(), dtype,
                                 value, source))

    def _wrap(self, kind: str) -> Wrap:
        """Call the original, then record ``kind``."""
        def make(func: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result = func(*args, **kwargs)
                self.record(kind)
                return result

            return wrapper

        return Wrap(make)

    def _clock(self, source: str, scale: float = 1.0) -> Wrap:
        """Read the original clock, and record the value the learner got (in seconds)."""
        def make(func: Callable[[], Any]) -> Callable[[], Any]:
            def read() -> Any:
                value = func()
                self.record("clock", value=value / scale, source=source)
                return value

            return read

        return Wrap(make)

    def _clock_patches(self) -> dict[Target, object]:
        clocks = {(time, "time"): ("time", 1.0), (time, "time_ns"): ("time", 1e9),
                  (time, "perf_counter"): ("perf_counter", 1.0), (time, "perf_counter_ns"): ("perf_counter", 1e9),
                  (time, "monotonic"): ("monotonic", 1.0), (time, "monotonic_ns"): ("monotonic", 1e9),
                  (timeit, "default_timer"): ("perf_counter", 1.0)}
        return {target: self._clock(source, scale) for target, (source, scale) in clocks.items()}

    def _patches(self) -> dict[Target, object]:
        return self._clock_patches()

    def _enter(self) -> None:
        """Before recording starts (a real GPU: drain the queue, cap the memory)."""

    def __enter__(self) -> _Watched:
        self.entered()
        self._enter()
        self._stack.enter_context(patched(self._patches()))
        self._stack.enter_context(_Recorder(self))
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.label_failure(exc)
        self._stack.close()


class CpuDevice(_Watched):
    """The CPU, watched: what the learner's code does when it is handed ``torch.device("cpu")``."""

    mode = "cpu"
    label = "cpu"

    def __init__(self, budget_bytes: int | None = None) -> None:
        super().__init__("cpu", budget_bytes)
        self.meter = MemoryMeter(budget_bytes, "cpu (grader's budget)")

    def live_bytes(self) -> int:
        return self.meter.live_bytes()

    def fill_capacity(self, chunk_bytes: int) -> int:
        return (self.meter.budget or 0) // chunk_bytes

    def _patches(self) -> dict[Target, object]:
        return {**self._clock_patches(), (torch.cpu, "synchronize"): self._wrap("sync")}

    def _enter(self) -> None:
        self._stack.enter_context(self.meter)


class RealAccelerator(_Watched):
    """Records what the learner's code does on a real CUDA or MPS device."""

    def __init__(self, kind: str, budget_bytes: int | None = None) -> None:
        super().__init__(kind, budget_bytes)
        self.mode = kind
        self._backend: Any = torch.cuda if kind == "cuda" else torch.mps
        name = torch.cuda.get_device_name(0) if kind == "cuda" else "Apple GPU"
        self.label = f"{kind} ({name})"
        # Taken before the learner-facing functions are wrapped: recording must not record itself.
        self._allocated = kept_original(torch.cuda.memory_allocated if kind == "cuda"
                                        else torch.mps.current_allocated_memory)
        self._empty_cache = kept_original(self._backend.empty_cache)

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

    def _patches(self) -> dict[Target, object]:
        targets: list[tuple[object, str, str]] = [
            (self._backend, "synchronize", "sync"),
            (self._backend, "empty_cache", "empty_cache"),
        ]
        if self.mode == "cuda":
            targets.append((torch.cuda, "memory_allocated", "memory_read"))
        accel = getattr(torch, "accelerator", None)
        if accel is not None:
            targets.append((accel, "synchronize", "sync"))
        wrapped = {(obj, attr): self._wrap(kind) for obj, attr, kind in targets if hasattr(obj, attr)}
        return {**self._clock_patches(), **wrapped}

    def _enter(self) -> None:
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


class StandInDevice(StandIn, _Labelled):
    """A stand-in accelerator as a check's device."""

    def __enter__(self) -> StandInDevice:
        self.entered()
        super().__enter__()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.label_failure(exc)
        super().__exit__(exc_type, exc, tb)


def open_device(kind: str, forced: str | None, *, virtual_clock: bool = False, budget_bytes: int | None = None,
                real_ok: Callable[[str], bool] = lambda mode: True, typed_oom: bool = False) -> Device:
    """The device of ``kind`` this check grades on, on this machine.

    ``forced`` is ``grader grade --device``: "cpu" grades every accelerator kind on its
    stand-in. ``real_ok(mode)`` False: the check cannot grade fairly on that real device
    (bfloat16 on a T4, the untyped OOM of MPS), so it grades on the stand-in, and says so.
    ``virtual_clock`` asks for deterministic timings: on a machine without the device it is the
    stand-in's virtual clock; on a real device the clocks are the real ones. ``typed_oom``: the MPS
    stand-in runs out of memory with torch.OutOfMemoryError instead of MPS's plain RuntimeError.
    """
    if kind == "cpu":
        return CpuDevice(budget_bytes)
    real = real_accelerator_type() if forced in (None, "auto", kind) else None
    if real == kind and real_ok(kind):
        return RealAccelerator(kind, budget_bytes)
    accel_kind: Kind = "cuda" if kind == "cuda" else "mps"
    return StandInDevice(accel_kind, virtual_clock=virtual_clock, budget_bytes=budget_bytes, typed_oom=typed_oom)


def open_accelerator(forced: str | None, *, virtual_clock: bool = False, budget_bytes: int | None = None,
                     real_ok: Callable[[str], bool] = lambda mode: True) -> Device:
    """The machine's accelerator (its kind when it has one; else CUDA's stand-in)."""
    kind = real_accelerator_type() if forced in (None, "auto", "cuda", "mps") else None
    if forced in ("cuda", "mps"):
        kind = forced
    return open_device(kind or "cuda", forced, virtual_clock=virtual_clock, budget_bytes=budget_bytes,
                       real_ok=real_ok)
