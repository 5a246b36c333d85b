"""The device sessions of the learner process: the CPU, a real accelerator, or a stand-in.

The judge opens a session (``OpenDevice``) and calls the learner's functions inside it. Every
session exposes the same small surface — ``device``, ``mode``, ``label``, ``events``,
``live_bytes()``, ``fill_capacity()``, ``place()`` — so that the runner (grader/learner/runner.py)
treats them alike. On the CPU and on a real GPU the events are recorded by wrapping the
synchronize/clock/cache functions and watching the ops; on a stand-in they come from the
emulation itself (grader/emulation/standin.py). Which kind of session a check gets is the judge's
decision, made from the facts this process sent before any learner code ran.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from grader.emulation.autocast import kernels
from grader.emulation.clocks import RecordedClocks, held_as_default
from grader.emulation.observer import Observer
from grader.emulation.patching import (
    NO_LEARNER_CODE,
    LearnerCode,
    Target,
    Wrap,
    kept_original,
    patched,
    preloaded_modules,
)
from grader.emulation.standin import Kind, StandIn
from grader.reference import modes
from grader.reference.device import CostModel
from grader.reference.meter import MemoryMeter
from grader.wire.messages import CudaFacts, DeviceKind, DeviceMode, Event, EventKind, Hello, OpenDevice, RequestedDevice
from grader.wire.values import real_device

_perf_counter = time.perf_counter  # the real clock, whatever a session patches later
# GradScaler runs on MPS from torch 2.8 (pytorch/pytorch#150255); before, its unscale step
# casts to float64, which MPS lacks.
MPS_GRAD_SCALER_TORCH = (2, 8)


def usable_share(gpu_share: float) -> float:
    """The fraction of the GPU's memory this learner process may use, within sane bounds."""
    return min(max(gpu_share, 0.05), 1.0)


def apply_gpu_share(gpu_share: float) -> None:
    """Before any learner code: cap this process at its part of the GPU (batch workers split it)."""
    if torch.cuda.is_available() and usable_share(gpu_share) < 1.0:
        torch.cuda.set_per_process_memory_fraction(usable_share(gpu_share))


def _torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def name_the_processor() -> None:
    """``platform.processor()`` answers the machine's architecture where ``uname -p`` says "unknown".

    Python reads the processor's name from ``uname -p``: Ubuntu's (Colab, Kaggle, Gradescope's images) and
    Fedora's answer the architecture ("x86_64"), macOS "arm" or "i386", Windows its CPU's identifier; Debian's
    coreutils answer "unknown", which Python gives as "". So a ``describe_device(cpu)`` whose name is
    ``platform.processor()``, non-empty on every learner's machine, lost ex1's check of the CPU's description
    ("`name` is ''") only where the grading host is Debian (this project's machines): a grade that depended on the
    grader's distribution. Python's ``uname_result`` keeps the name it computed in the instance
    (``functools.cached_property``), and ``platform`` keeps that instance: the architecture is put there, once
    per process before any learner code runs (and in the fork server, whose children inherit it)."""
    import platform

    uname = platform.uname()
    if not uname.processor and uname.machine:
        vars(uname)["processor"] = uname.machine


def hello(forced: RequestedDevice) -> Hello:
    """What this machine has, found before the learner's code exists here (``forced``: --device)."""
    import platform

    name_the_processor()
    cuda = None
    if forced != "cpu" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        cuda = CudaFacts(torch.cuda.get_device_name(0), tuple(torch.cuda.get_device_capability(0)),  # type: ignore[arg-type]
                         int(props.total_memory), torch.cuda.device_count())
    mps_backend = getattr(torch.backends, "mps", None)
    mps = forced != "cpu" and mps_backend is not None and bool(mps_backend.is_available())
    newer = getattr(mps_backend, "is_macos_or_newer", None)
    return Hello(torch=torch.__version__, cuda=cuda, mps=mps,
                 cuda_bf16=bool(cuda is not None and torch.cuda.is_bf16_supported()),
                 mps_bf16=bool(mps and newer is not None and newer(14, 0)),
                 mps_grad_scaler=_torch_version() >= MPS_GRAD_SCALER_TORCH,
                 cpu_name=platform.processor() or platform.machine() or "cpu")


def place(tensor: torch.Tensor, device: torch.device, standin: StandIn | None) -> torch.Tensor:
    """A tensor the judge sent, put on the session's device without recording anything."""
    if device.type == "cpu":
        return tensor
    if standin is not None:
        return standin.adopt(tensor)
    with modes.off():
        return tensor.detach().to(device).requires_grad_(tensor.requires_grad)


class Watched:
    """A real device (the CPU, a real GPU): its functions wrapped to record what the learner does."""

    mode: DeviceMode
    label: str
    standin: StandIn | None = None

    def __init__(self, kind: DeviceKind, budget_bytes: int | None, code: LearnerCode) -> None:
        self.device = torch.device(kind)
        self.code = code  # the learner's modules: a wrapped clock is also rebound where they hold it
        self.events: list[Event] = []
        self.budget = budget_bytes
        self.meters: list[MemoryMeter] = []  # who its Observer counts for: a CPU session's meter, a call's
        self._stack = contextlib.ExitStack()

    def live_bytes(self) -> int:
        raise NotImplementedError

    def fill_capacity(self, chunk_bytes: int) -> int:
        raise NotImplementedError

    def device_of(self, tensor: torch.Tensor) -> str:
        return real_device(tensor)

    def record(self, kind: EventKind, device: str = "", dtype: str = "", value: float = 0.0, source: str = "") -> None:
        self.events.append(Event(kind, device or self.device.type, _perf_counter(), self.live_bytes(), dtype,
                                 value, source))

    def _wrap(self, kind: EventKind) -> Wrap:
        """Call the original, then record ``kind``."""
        def make(func: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                result = func(*args, **kwargs)
                self.record(kind)
                return result

            return wrapper

        return Wrap(make)

    def _clock_patches(self) -> dict[Target, object]:
        """Every clock the standard library offers, each read recorded (grader/emulation/clocks.py)."""
        return RecordedClocks(lambda source, value: self.record("clock", value=value, source=source)).replacements()

    def _patches(self) -> dict[Target, object]:
        return self._clock_patches()

    def _enter(self) -> None:
        """Before recording starts (a real GPU: drain the queue, cap the memory)."""

    def __enter__(self) -> Watched:
        self._enter()
        replacements = self._patches()
        for func, attr, value in held_as_default(replacements):
            self._stack.callback(setattr, func, attr, getattr(func, attr))
            setattr(func, attr, value)
        self._stack.enter_context(patched(replacements, self.code))
        self._stack.enter_context(Observer(self.record, self.events, self.meters))
        return self


    def __exit__(self, *exc: object) -> None:
        self._stack.close()


class DeviceEventClock:
    """A real GPU's timing events (``torch.cuda.Event(enable_timing=True)``) as reads of its clock.

    Each ``record()`` takes its place among the events, in order with the matmuls around it, as a
    stand-in's events do (grader/emulation/runtime.py); what it read is known only when the learner
    asks ``elapsed_time``, and is then filled in: the pair's difference is exactly what the learner
    got, so ex2's checks judge the number by the two events that give it — divided by the repeats or
    not, warm-up before — as they judge two host clock reads, whatever else shares the GPU. Before
    this, a number timed with events explained nothing on a real GPU and was judged by how the
    device's time grew from 2 repeats to 8: beside seven other gradings on an H200, the PyTorch docs'
    events style lost ``returns_mean_not_total`` in 2 of 8 draws (docs/gpu-validation.md). An event
    never asked about keeps the source ``UNTIMED`` and explains nothing. The first reading of a pair
    is its host time at ``record()`` (a real, roughly ordered clock), the other is that plus the
    elapsed time; a pair that shares an event already read is read from it.
    """

    UNTIMED = " (never timed)"

    def __init__(self, session: Watched, source: str) -> None:
        self.session = session
        self.source = source  # "cuda.Event", as a stand-in's events read
        self.latest: dict[int, tuple[Any, int]] = {}  # id(event) -> (the event, kept alive; its latest record)

    def patches(self, event_class: type) -> dict[Target, object]:
        return {(event_class, "record"): Wrap(self._recording), (event_class, "elapsed_time"): Wrap(self._timing)}

    def _recording(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def record(event: Any, *args: Any, **kwargs: Any) -> Any:
            result = func(event, *args, **kwargs)
            self.latest[id(event)] = (event, len(self.session.events))
            self.session.record("clock", source=self.source + self.UNTIMED)
            return result

        return record

    def _timing(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def elapsed_time(event: Any, end_event: Any, *args: Any, **kwargs: Any) -> Any:
            milliseconds = func(event, end_event, *args, **kwargs)
            self.read(event, end_event, float(milliseconds) / 1000)
            return milliseconds

        return elapsed_time

    def _index(self, event: Any) -> int | None:
        latest = self.latest.get(id(event))
        return latest[1] if latest is not None and latest[0] is event else None

    def read(self, start: Any, end: Any, seconds: float) -> None:
        """``start.elapsed_time(end)`` said ``seconds``: fill in what the two records read."""
        i, j = self._index(start), self._index(end)
        if i is None or j is None or i == j:
            return
        events = self.session.events
        first, second = events[i], events[j]
        if first.source == self.source and second.source == self.source:
            return
        if first.source == self.source:
            events[j] = dataclasses.replace(second, value=first.value + seconds, source=self.source)
        elif second.source == self.source:
            events[i] = dataclasses.replace(first, value=second.value - seconds, source=self.source)
        else:
            events[i] = dataclasses.replace(first, value=first.host, source=self.source)
            events[j] = dataclasses.replace(second, value=first.host + seconds, source=self.source)


class CpuSession(Watched):
    """The CPU, watched: what the learner's code does when it is handed ``torch.device("cpu")``."""

    mode: DeviceMode = "cpu"
    label = "cpu"

    def __init__(self, budget_bytes: int | None = None, code: LearnerCode = NO_LEARNER_CODE) -> None:
        super().__init__("cpu", budget_bytes, code)
        self.meter = MemoryMeter(budget_bytes, "cpu (grader's budget)")
        self.meters.append(self.meter)  # its observer counts the live tensors too

    def live_bytes(self) -> int:
        return self.meter.live_bytes()

    def fill_capacity(self, chunk_bytes: int) -> int:
        return (self.meter.budget or 0) // chunk_bytes

    def _patches(self) -> dict[Target, object]:
        return {**self._clock_patches(), (torch.cpu, "synchronize"): self._wrap("sync")}


class RealSession(Watched):
    """Records what the learner's code does on a real CUDA or MPS device."""

    def __init__(self, kind: DeviceKind, budget_bytes: int | None = None, code: LearnerCode = NO_LEARNER_CODE,
                 gpu_share: float = 1.0) -> None:
        super().__init__(kind, budget_bytes, code)
        self.gpu_share = usable_share(gpu_share)
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
        with modes.off():
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
        targets: list[tuple[object, str, EventKind]] = [
            (self._backend, "synchronize", "sync"),
            (self._backend, "empty_cache", "empty_cache"),
        ]
        if self.mode == "cuda":
            targets.append((torch.cuda, "memory_allocated", "memory_read"))
        accel = getattr(torch, "accelerator", None)
        if accel is not None:
            targets.append((accel, "synchronize", "sync"))
        wrapped = {(obj, attr): self._wrap(kind) for obj, attr, kind in targets if hasattr(obj, attr)}
        events = DeviceEventClock(self, f"{self.mode}.Event")  # torch.mps.Event: untested, no Mac has run this
        timed = events.patches(self._backend.Event) if hasattr(self._backend, "Event") else {}
        return {**self._clock_patches(), **wrapped, **timed}

    def _enter(self) -> None:
        self._backend.synchronize()
        self._backend.empty_cache()
        if self.budget is not None and self.mode == "cuda":
            # The OOM exercise then fails in seconds and never starves other GPU users.
            total = torch.cuda.get_device_properties(self.device).total_memory
            # The cap counts reserved memory (whole segments), not only live tensors.
            fraction = min(self.gpu_share, (torch.cuda.memory_reserved() + self.budget) / total)
            torch.cuda.set_per_process_memory_fraction(fraction)
            self._stack.callback(torch.cuda.set_per_process_memory_fraction, self.gpu_share)
        elif self.budget is not None and self.mode == "mps":  # untested: no Mac has run this yet
            limit = torch.mps.recommended_max_memory()
            torch.mps.set_per_process_memory_fraction((torch.mps.current_allocated_memory() + self.budget) / limit)
            self._stack.callback(torch.mps.set_per_process_memory_fraction, 0.0)


class StandInSession(StandIn):
    """A stand-in accelerator as a session."""

    @property
    def standin(self) -> StandIn:
        return self


Session = CpuSession | RealSession | StandInSession


def before_forks() -> None:
    """What every learner process would otherwise do first, done once by the learner's fork server before it
    forks: the stand-ins' autocast kernels registered (on a key no op reaches until a stand-in's autocast is
    on, grader/emulation/autocast.py), and the modules it holds recorded as none of the learner's
    (grader/emulation/patching.py ``preloaded_modules``); and the processor's name, which ``hello`` reports:
    Python's ``platform.processor()`` runs ``uname -p`` in a subprocess at its first call (a process forked
    and exec'd and waited for, 3-4 ms, in the learner process's start before its Hello: one ``uname`` per
    learner in the machine's process accounting), and keeps the answer in the ``platform`` module, which the
    children inherit — the same machine's answer, asked once (``name_the_processor``)."""
    kernels()
    preloaded_modules()
    name_the_processor()


def open_session(request: OpenDevice, code: LearnerCode, gpu_share: float = 1.0) -> Session:
    """The session the judge asked for, patching where ``code``'s modules hold what it replaces. A
    real accelerator the machine lacks is a protocol error of the judge's, never silently a
    stand-in: the judge decided from this process's Hello."""
    if request.kind == "cpu":
        return CpuSession(request.budget_bytes, code)
    if request.standin:
        kind: Kind = request.kind
        return StandInSession(kind, CostModel().smaller(request.smaller), virtual_clock=request.virtual_clock,
                              budget_bytes=request.budget_bytes, typed_oom=request.typed_oom, code=code)
    available = torch.cuda.is_available() if request.kind == "cuda" else bool(torch.backends.mps.is_available())
    if not available:
        raise RuntimeError(f"no real {request.kind} device here")
    return RealSession(request.kind, request.budget_bytes, code, gpu_share)
