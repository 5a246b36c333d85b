"""An accelerator emulated on the CPU, so that a machine without a GPU still grades devices.

The learner's code receives ``torch.device("cuda")`` — or ``torch.device("mps")``: a stand-in
of each kind, so that every device branch a learner writes runs. Under a stand-in:

* every tensor really lives on the CPU but carries a *device tag* ("cuda", "mps" or "cpu");
  ``.device``/``.is_cuda``/``.is_mps`` report the tag, ``.to()`` (positional or keyword),
  ``.cuda()``/``.cpu()`` copy and retag, factories honour ``device=`` (and
  ``torch.set_default_device``), ``pin_memory()`` / ``pin_memory=True`` pin host memory, and an
  op that mixes a device tensor with a (non-scalar) CPU tensor raises PyTorch's own "Expected all
  tensors to be on the same device" error;
  ``.numpy()`` of a device tensor raises the real TypeError;
* kernels are *asynchronous* on a virtual timeline: launching costs the host a few
  microseconds, the kernel finishes later, and only a synchronize (or ``.item()``, a blocking
  ``.cpu()`` …) makes the host wait. A device→host copy with ``non_blocking=True`` lands only at
  the next synchronize: read before, it holds zeros, as on a GPU it would hold whatever was
  there. With ``virtual_clock=True`` the clocks a learner may read (time.time, perf_counter,
  monotonic, timeit.default_timer, CUDA and MPS events) show that timeline, so a timing without
  synchronize, without warm-up, or with copies in the timed loop gives the same wrong numbers it
  would on a real GPU — deterministically, whatever the load on the grading machine;
* the device's API answers as the real one does: ``torch.cuda`` (device count, properties,
  memory statistics, events, streams) for the CUDA stand-in; ``torch.mps`` and
  ``torch.backends.mps`` for the MPS one, where ``torch.cuda`` says what it says on a Mac
  ("Torch not compiled with CUDA enabled"), float64 does not exist and running out of memory
  is a plain ``RuntimeError`` ("MPS backend out of memory"); ``torch.accelerator`` for both.

Tensors stay plain CPU tensors (no subclass), so autograd works: design.md notes that a
wrapper subclass claiming device cuda aborts the process inside autograd on a CPU build.
"""

from __future__ import annotations

import contextlib
import time
import timeit
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from grader.emulation.patching import NO_LEARNER_CODE, LearnerCode, Target, patched
from grader.reference.device import CAPABILITY, MPS_FLOAT64, NAMES, NO_CUDA, TOTAL_MEMORY, CostModel
from grader.reference.meter import MemoryMeter
from grader.wire.messages import DeviceMode, Event, EventKind, MiB
from grader.wire.values import PINNED, TAG

Kind = Literal["cuda", "mps"]


MATMULS = {"mm", "matmul", "__matmul__", "__rmatmul__", "bmm", "addmm", "linear", "baddbmm"}
# Arithmetic worth recording for placement checks (creation and views are not).
ARITHMETIC = {"mul", "add", "sub", "div", "__mul__", "__add__", "__sub__", "__truediv__", "__rmul__", "__radd__",
              "mul_", "add_", "addcmul", "relu", "softmax", "log_softmax", "cross_entropy", "linear", "pow", "exp"}
# Ops that legally take tensors on two devices (a copy across devices, a type query).
MIXED_OK = {"copy_", "_has_compatible_shallow_copy_type", "set_", "is_set_to", "_is_any_true"}
# Reading a value back to Python makes the host wait for the device, as on a real GPU.
SYNCING = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "__repr__", "__format__", "__str__"}
# Functions that take `device=` without creating a tensor there: nn.Module.to(device=...) parses
# its arguments with _parse_to, which must see the device the learner named.
NOT_FACTORIES = {"_parse_to"}
# Factories that honour torch.set_default_device when no `device=` is given.
FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "linspace", "logspace", "eye",
             "tensor", "empty_strided", "randperm", "normal", "zeros_like", "ones_like"}


@dataclass
class Timeline:
    """Host time and the time the device queue drains, in virtual seconds."""

    host: float = 0.0
    device_free: float = 0.0

    def launch(self, kernel_s: float, launch_s: float) -> None:
        self.host += launch_s
        self.device_free = max(self.device_free, self.host) + kernel_s

    def run_on_host(self, seconds: float) -> None:
        self.host += seconds

    def synchronize(self) -> None:
        self.host = max(self.host, self.device_free)


def device_tag(t: torch.Tensor) -> str:
    return getattr(t, TAG, t.device.type)


def _set_pinned(obj: object) -> None:
    for leaf in tree_leaves(obj):
        if isinstance(leaf, torch.Tensor):
            setattr(leaf, PINNED, True)


def _set_tag(obj: object, tag: str) -> None:
    for leaf in tree_leaves(obj):
        if isinstance(leaf, torch.Tensor):
            setattr(leaf, TAG, tag)


class _Mode(TorchFunctionMode):
    def __init__(self, standin: StandIn) -> None:
        super().__init__()
        self.s = standin

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        s = self.s
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        owner = getattr(func, "__self__", None)
        if name in ("__get__", "__set__") and owner is not None:
            return s.attribute(func, name, getattr(owner, "__name__", ""), args)
        if name in NOT_FACTORIES:
            return func(*args, **kwargs)
        if name == "pin_memory" and args and isinstance(args[0], torch.Tensor):
            pinned = args[0].clone()  # a real pin copies into page-locked host memory
            setattr(pinned, PINNED, True)
            _set_tag(pinned, "cpu")
            return pinned
        if name == "is_pinned" and args and isinstance(args[0], torch.Tensor):
            return bool(getattr(args[0], PINNED, False))
        pin = bool(kwargs.pop("pin_memory", False))
        if pin:
            out = s.op(func, name, args, kwargs)
            _set_pinned(out)
            return out
        if func in (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu, torch.Tensor.type):
            return s.move(func, name, args, kwargs)
        if name == "numpy" and args and device_tag(args[0]) == s.kind and not kwargs.get("force"):
            raise TypeError(
                f"can't convert {s.kind}:0 device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        if name in SYNCING and args and isinstance(args[0], torch.Tensor) and device_tag(args[0]) == s.kind:
            s.timeline.synchronize()
        return s.op(func, name, args, kwargs)


def _no_cuda(*_: Any, **__: Any) -> Any:
    raise AssertionError(NO_CUDA)


_REAL_DEVICE = torch.device


class _DeviceMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _REAL_DEVICE)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _REAL_DEVICE)


def device_type_for(kind: str) -> type:
    """``torch.device`` as it behaves on a machine whose accelerator is ``kind``: ``torch.device(0)``
    (fastai's ``torch.device(torch.cuda.current_device())``) is that accelerator's device 0. It makes
    real ``torch.device`` objects, and ``isinstance(x, torch.device)`` still holds."""

    class device(metaclass=_DeviceMeta):  # noqa: N801 - it stands for torch.device
        def __new__(cls, *args: Any, **kwargs: Any) -> torch.device:  # type: ignore[misc]
            if args and isinstance(args[0], int) and not isinstance(args[0], bool):
                return _REAL_DEVICE(kind, args[0])
            return _REAL_DEVICE(*args, **kwargs)

    return device


class StandIn:
    """Use as a context manager; ``device`` is what the learner's functions receive."""

    mode: DeviceMode = "standin"
    virtual = True

    def __init__(self, kind: Kind = "cuda", costs: CostModel | None = None, virtual_clock: bool = False,
                 budget_bytes: int | None = None, typed_oom: bool = False, *,
                 code: LearnerCode = NO_LEARNER_CODE) -> None:
        self.kind = kind
        self.code = code  # the learner's modules, where a patched function is also rebound
        self.device = torch.device(kind)
        self.label = f"{kind} (stand-in)"
        self.costs = costs or CostModel()
        self.timeline = Timeline()
        self.events: list[Event] = []
        # MPS runs out of memory with a plain RuntimeError; ``typed_oom`` makes it CUDA's
        # torch.OutOfMemoryError, for a check about what to do *after* an OOM on each device.
        untyped = kind == "mps" and not typed_oom
        self.meter = MemoryMeter(budget_bytes, f"{kind}:0 (stand-in)", error=self._oom if untyped else None)
        self.virtual_clock = virtual_clock
        self.default_device: str | None = None  # torch.set_default_device("cuda") inside the learner's code
        self._warm: set[torch.dtype] = set()
        self._stack = contextlib.ExitStack()
        self._reserved = 0
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # non_blocking copies to the host

    # -- what checks read ---------------------------------------------------------------
    def matmul_seconds(self, n: int) -> float:
        return 2.0 * n**3 / self.costs.gpu_flops

    def cpu_matmul_seconds(self, n: int) -> float:
        return 2.0 * n**3 / self.costs.cpu_flops

    def live_bytes(self) -> int:
        return self.meter.live_bytes()

    def fill_capacity(self, chunk_bytes: int) -> int:
        return (self.meter.budget or 0) // chunk_bytes

    def record(self, kind: EventKind, device: str = "", dtype: str = "", value: float = 0.0,
               source: str = "") -> None:
        drained = self.timeline.host >= self.timeline.device_free
        self.events.append(Event(kind, device, self.timeline.host, self.meter.live_bytes(), dtype, value, source,
                                 drained))

    # -- the mode's work ----------------------------------------------------------------
    def attribute(self, func: Callable[..., Any], name: str, prop: str, args: tuple[Any, ...]) -> Any:
        if name == "__set__":
            result = func(*args)
            if prop == "data" and isinstance(args[1], torch.Tensor):
                setattr(args[0], TAG, device_tag(args[1]))
            return result
        tensor = args[0]
        if prop == "device":
            tag = device_tag(tensor)
            return torch.device(tag, 0) if tag == self.kind else func(*args)
        if prop in ("is_cuda", "is_mps"):
            return device_tag(tensor) == prop[3:]
        if prop == "is_cpu":
            return device_tag(tensor) == "cpu"
        result = func(*args)
        if prop in ("grad", "data", "T", "mT", "H", "mH", "real", "imag") and isinstance(result, torch.Tensor):
            setattr(result, TAG, device_tag(tensor))
        return result

    def _check_dtype(self, tag: str, dtype: torch.dtype) -> None:
        if tag == "mps" and dtype == torch.float64:
            raise TypeError(MPS_FLOAT64)

    def _target(self, device: torch.device | str | int | None) -> str:
        if device is None:
            return "cpu"
        target = "cuda" if isinstance(device, int) else torch.device(device).type  # .to(0) is cuda:0
        if target not in ("cpu", self.kind):
            raise (AssertionError(NO_CUDA) if target == "cuda" else
                   RuntimeError(f"{target} is not available on this machine (the grader's {self.label})"))
        return target

    def move(self, func: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tensor = args[0]
        source = device_tag(tensor)
        if name == "type":
            return func(*args, **kwargs)
        if name in ("cuda", "cpu"):
            target = self._target(name)
            dtype, non_blocking, memory_format = None, bool(kwargs.get("non_blocking", False)), None
        else:
            copy = kwargs.pop("copy", False)
            device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args[1:], **kwargs)
            kwargs["copy"] = copy
            other = args[1] if len(args) > 1 else kwargs.get("other")
            target = device_tag(other) if isinstance(other, torch.Tensor) else (
                self._target(device) if device is not None else source)
        options = {"dtype": dtype, "memory_format": memory_format}
        given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
        self._check_dtype(target, dtype or tensor.dtype)
        result = torch.Tensor.to(tensor, copy=bool(kwargs.get("copy")), **given)
        if target != source:
            if result is tensor:
                result = tensor.clone()  # a real transfer never returns the same tensor
            nbytes = tensor.numel() * tensor.element_size()
            if target == self.kind:
                self.timeline.run_on_host(self.costs.launch_s)
                self.timeline.launch(nbytes / self.costs.transfer_bytes_per_s, 0.0)
                self.record("h2d", target)
            elif non_blocking:
                # Queued behind the device's work; the host goes on at once. Until a synchronize
                # the host buffer holds what it held before: here, zeros.
                self.timeline.launch(nbytes / self.costs.transfer_bytes_per_s, self.costs.launch_s)
                landed = result
                result = torch.zeros_like(landed)
                self._pending.append((result, landed))
                self.record("d2h_async", target)
            else:
                self.timeline.synchronize()
                self.timeline.run_on_host(nbytes / self.costs.transfer_bytes_per_s)
                self.record("d2h", target)
        _set_tag(result, target)
        return result

    def op(self, func: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        target: str | None = None
        if kwargs.get("device") is not None:
            target = self._target(kwargs["device"])
            if target == self.kind:
                kwargs["device"] = "cpu"
        elif self.default_device is not None and name in FACTORIES and not name.endswith("_like"):
            target = self.default_device
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        on_device = any(device_tag(t) == self.kind for t in tensors)
        on_cpu = any(device_tag(t) == "cpu" and t.dim() > 0 for t in tensors)
        if on_device and on_cpu and name not in MIXED_OK:
            self.record("mismatch")
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{self.kind}:0 and cpu! (raised by the grader's stand-in GPU, exactly as on a real GPU)"
            )
        out = func(*args, **kwargs)
        if name == "copy_":
            return out  # the destination keeps its device
        tag = target or (self.kind if on_device else "cpu")
        if isinstance(out, torch.Tensor):
            self._check_dtype(tag, out.dtype)
            if device_tag(out) != tag and any(out is t for t in tensors):
                out = out.clone()  # as_tensor(x, device=...) hands back x itself only on the same device
        _set_tag(out, tag)
        self.account(name, tag, out, args)
        return out

    def account(self, name: str, tag: str, out: Any, args: tuple[Any, ...]) -> None:
        first = next((t for t in tree_leaves(out) if isinstance(t, torch.Tensor)), None)
        if first is None:
            return
        if name in MATMULS:
            flops = self.costs.matmul_flops(first, args)
            if tag == self.kind:
                extra = 0.0 if first.dtype in self._warm else self.costs.first_matmul_s
                self._warm.add(first.dtype)
                self.timeline.launch(flops / self.costs.gpu_flops + extra, self.costs.launch_s)
            else:
                self.timeline.run_on_host(flops / self.costs.cpu_flops)
            self.record("matmul", tag, str(first.dtype))
            return
        if tag == self.kind:
            nbytes = first.numel() * first.element_size()
            self.timeline.launch(nbytes / self.costs.elementwise_bytes_per_s, self.costs.launch_s)
        else:
            self.timeline.run_on_host(self.costs.launch_s / 5)
        if name in ARITHMETIC:
            self.record("op", tag, str(first.dtype))

    # -- the device's API as the learner sees it ---------------------------------------------
    def synchronize(self, *_: Any, **__: Any) -> None:
        self.timeline.synchronize()
        for host, landed in self._pending:
            host.copy_(landed)
        self._pending.clear()
        self.record("sync", self.kind)

    def empty_cache(self) -> None:
        self._reserved = self.meter.live_bytes()
        self.record("empty_cache", self.kind)

    def memory_allocated(self, *_: Any, **__: Any) -> int:
        live = self.meter.live_bytes()
        self.record("memory_read", self.kind)
        return live

    def memory_reserved(self, *_: Any, **__: Any) -> int:
        self._reserved = max(self._reserved, self.meter.live_bytes())
        return self._reserved

    def reset_peak(self, *_: Any, **__: Any) -> None:
        self.meter.peak = self.meter.live_bytes()

    def memory_stats(self, *_: Any, **__: Any) -> dict[str, int]:
        live = self.memory_allocated()
        return {"allocated_bytes.all.current": live, "allocated_bytes.all.peak": self.meter.peak,
                "reserved_bytes.all.current": self.memory_reserved(), "num_ooms": self.meter.ooms}

    def set_default_device(self, device: Any) -> None:
        self.default_device = None if device is None else self._target(device)
        if self.default_device == "cpu":
            self.default_device = None

    def get_default_device(self) -> torch.device:
        return torch.device(self.default_device, 0) if self.default_device else torch.device("cpu")

    def _oom(self, asked: int, live: int, budget: int) -> BaseException:
        return RuntimeError(
            f"MPS backend out of memory (MPS allocated: {live / MiB:.2f} MB, other allocations: 0 bytes, "
            f"max allowed: {budget / MiB:.2f} MB). Tried to allocate {asked / MiB:.2f} MB on private pool "
            "(the grader's memory budget on its mps stand-in)."
        )

    def _clock(self, source: str, scale: float = 1.0, offset: float = 0.0,
               as_int: bool = False) -> Callable[[], Any]:
        def read() -> Any:
            self.record("clock", value=offset + self.timeline.host, source=source)
            value = (offset + self.timeline.host) * scale
            return int(value) if as_int else value

        return read

    def _event_class(self) -> type:
        s = self

        class DeviceEvent:
            """torch.cuda.Event / torch.mps.event.Event on the virtual timeline."""

            def __init__(self, enable_timing: bool = False, **_: Any) -> None:
                self.at: float | None = None

            def record(self, *_: Any) -> None:
                s.timeline.run_on_host(s.costs.launch_s)
                self.at = max(s.timeline.host, s.timeline.device_free)
                s.record("clock", value=self.at, source=f"{s.kind}.Event")

            def synchronize(self) -> None:
                s.timeline.host = max(s.timeline.host, self.at or 0.0)
                s.record("sync", s.kind)

            def wait(self, *_: Any) -> None:
                return None

            def query(self) -> bool:
                return s.timeline.host >= (self.at or 0.0)

            def elapsed_time(self, end: DeviceEvent) -> float:
                if self.at is None or end.at is None or s.timeline.host < end.at:
                    raise RuntimeError(f"{s.kind.upper()} error: device not ready (an event was not recorded "
                                       "or not synchronized)")
                return (end.at - self.at) * 1000.0

        return DeviceEvent

    def _stream(self) -> object:
        return types.SimpleNamespace(synchronize=self.synchronize, query=lambda: True, is_capturing=lambda: False,
                                     wait_stream=lambda *_: None, device=self.device)

    def _common_patches(self, stream: object) -> dict[Target, object]:
        """torch.accelerator, the default device and the clocks: the same for both kinds."""
        s = self
        patches: dict[Target, object] = {
            (torch, "device"): device_type_for(s.kind),
            (torch, "set_default_device"): s.set_default_device,
            (torch, "get_default_device"): s.get_default_device,
        }
        accel = getattr(torch, "accelerator", None)
        if accel is not None:
            for attr, value in {
                "is_available": lambda: True, "current_accelerator": lambda *_, **__: torch.device(s.kind),
                "device_count": lambda: 1, "current_device_index": lambda: 0, "current_device_idx": lambda: 0,
                "set_device_index": lambda *_: None, "set_device_idx": lambda *_: None,
                "synchronize": s.synchronize, "current_stream": lambda *_: stream,
                "memory_allocated": s.memory_allocated, "memory_reserved": s.memory_reserved,
                "max_memory_allocated": lambda *_: s.meter.peak, "reset_peak_memory_stats": s.reset_peak,
                "memory_stats": s.memory_stats, "empty_cache": s.empty_cache,
            }.items():
                if hasattr(accel, attr):
                    patches[(accel, attr)] = value
        if self.virtual_clock:
            base = time.time()
            patches.update({
                (time, "time"): self._clock("time", offset=base),
                (time, "time_ns"): self._clock("time", 1e9, base, as_int=True),
                (time, "perf_counter"): self._clock("perf_counter"),
                (time, "perf_counter_ns"): self._clock("perf_counter", 1e9, as_int=True),
                (time, "monotonic"): self._clock("monotonic"),
                (time, "monotonic_ns"): self._clock("monotonic", 1e9, as_int=True),
                (timeit, "default_timer"): self._clock("perf_counter"),
            })
        return patches

    def _cuda_patches(self, stream: object) -> dict[Target, object]:
        s = self
        props = types.SimpleNamespace(name=NAMES["cuda"], total_memory=TOTAL_MEMORY, major=CAPABILITY[0],
                                      minor=CAPABILITY[1], multi_processor_count=80, is_integrated=False)
        cuda = torch.cuda
        return {
            (cuda, "is_available"): lambda: True,
            (cuda, "device_count"): lambda: 1,
            (cuda, "current_device"): lambda: 0,
            (cuda, "set_device"): lambda *_: None,
            (cuda, "get_device_name"): lambda *_: NAMES["cuda"],
            (cuda, "get_device_capability"): lambda *_: CAPABILITY,
            (cuda, "get_device_properties"): lambda *_: props,
            (cuda, "is_bf16_supported"): lambda *_, **__: True,
            (cuda, "synchronize"): s.synchronize,
            (cuda, "current_stream"): lambda *_: stream,
            (cuda, "default_stream"): lambda *_: stream,
            (cuda, "Event"): s._event_class(),
            (cuda, "empty_cache"): s.empty_cache,
            (cuda, "memory_allocated"): s.memory_allocated,
            (cuda, "max_memory_allocated"): lambda *_: s.meter.peak,
            (cuda, "memory_reserved"): s.memory_reserved,
            (cuda, "max_memory_reserved"): s.memory_reserved,
            (cuda, "reset_peak_memory_stats"): s.reset_peak,
            (cuda, "reset_max_memory_allocated"): s.reset_peak,
            (cuda, "memory_stats"): s.memory_stats,
            (cuda, "memory_summary"): lambda *_, **__: f"|  Allocated memory: {s.memory_allocated() / MiB:.1f} MiB  |",
            (cuda, "set_per_process_memory_fraction"): lambda *_, **__: None,
            (cuda, "mem_get_info"): lambda *_: (TOTAL_MEMORY - s.meter.live_bytes(), TOTAL_MEMORY),
            # Stand-in tensors draw from the CPU generator (torch.manual_seed calls these too).
            (cuda, "manual_seed"): lambda seed: None,
            (cuda, "manual_seed_all"): lambda seed: None,
            (cuda, "is_initialized"): lambda: True,
            (cuda, "init"): lambda: None,
            (cuda, "is_current_stream_capturing"): lambda: False,
            (torch.backends.mps, "is_available"): lambda: False,
        }

    def _mps_patches(self) -> dict[Target, object]:
        s = self
        mps = torch.mps
        patches: dict[Target, object] = {
            (torch.backends.mps, "is_available"): lambda: True,
            (torch.backends.mps, "is_built"): lambda: True,
            (mps, "synchronize"): s.synchronize,
            (mps, "empty_cache"): s.empty_cache,
            (mps, "current_allocated_memory"): s.memory_allocated,
            (mps, "driver_allocated_memory"): s.memory_reserved,
            (mps, "recommended_max_memory"): lambda: TOTAL_MEMORY,
            (mps, "set_per_process_memory_fraction"): lambda *_: None,
            (mps, "manual_seed"): lambda seed: None,
            (mps, "device_count"): lambda: 1,
            (mps, "is_available"): lambda: True,
            (mps, "Event"): s._event_class(),
            (mps.event, "Event"): s._event_class(),
        }
        newer = getattr(torch.backends.mps, "is_macos_or_newer", None)
        if newer is not None:
            patches[(torch.backends.mps, "is_macos_or_newer")] = lambda major, minor: (major, minor) <= (15, 0)
        # torch.cuda stays as this CPU build has it: exactly what a Mac's PyTorch says. On a
        # machine with CUDA, it must say so too.
        if torch.cuda.is_available():
            patches.update(cpu_build_cuda_patches())
        return patches

    def api_patches(self) -> dict[Target, object]:
        """The device's API, for the stand-in's duration (ex1's availability simulation uses it too)."""
        stream = self._stream()
        patches = self._common_patches(stream)
        patches.update(self._cuda_patches(stream) if self.kind == "cuda" else self._mps_patches())
        return patches

    def __enter__(self) -> StandIn:
        self._stack.enter_context(patched(self.api_patches(), self.code))
        self._stack.enter_context(_amp_on_cpu(self.kind))
        self._stack.enter_context(self.meter)
        self._stack.enter_context(_Mode(self))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def cpu_build_cuda_patches() -> dict[Target, object]:
    """torch.cuda as a PyTorch built without CUDA has it (a Mac, a CPU box), on any machine."""
    cuda = torch.cuda
    patches: dict[Target, object] = {(cuda, "is_available"): lambda: False, (cuda, "device_count"): lambda: 0,
                                     (cuda, "is_initialized"): lambda: False}
    for name in ("current_device", "set_device", "get_device_name", "get_device_capability", "get_device_properties",
                 "synchronize", "mem_get_info", "current_stream", "default_stream", "init"):
        patches[(cuda, name)] = _no_cuda
    return patches


@contextlib.contextmanager
def _amp_on_cpu(kind: str) -> Iterator[None]:
    """autocast/GradScaler for the stand-in run as CPU autocast/GradScaler, really."""
    autocast_cls = torch.amp.autocast_mode.autocast
    scaler_cls = torch.amp.GradScaler
    original_autocast = autocast_cls.__init__
    original_scaler = scaler_cls.__init__

    def autocast_init(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
        original_autocast(self, "cpu" if device_type == kind else device_type, *args, **kwargs)

    def scaler_init(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
        original_scaler(self, "cpu" if str(device).startswith(kind) else device, *args, **kwargs)

    autocast_cls.__init__ = autocast_init  # type: ignore[method-assign]
    scaler_cls.__init__ = scaler_init  # type: ignore[method-assign]
    try:
        yield
    finally:
        autocast_cls.__init__ = original_autocast  # type: ignore[method-assign]
        scaler_cls.__init__ = original_scaler  # type: ignore[method-assign]
