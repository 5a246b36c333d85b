"""An accelerator emulated on the CPU, so that a machine without a GPU still grades devices.

The learner's code receives ``torch.device("cuda")``. Under this stand-in:

* every tensor really lives on the CPU but carries a *device tag* ("cuda" or "cpu");
  ``.device``/``.is_cuda`` report the tag, ``.to()``/``.cuda()``/``.cpu()`` copy and retag,
  factories honour ``device=``, and an op that mixes a cuda tensor with a (non-scalar) cpu
  tensor raises PyTorch's own "Expected all tensors to be on the same device" error;
  ``.numpy()`` on a cuda tensor raises the real TypeError;
* kernels on the stand-in are *asynchronous* on a virtual timeline: launching costs the host
  a few microseconds, the kernel finishes later, and only a synchronize (or ``.item()``,
  ``.cpu()`` …) makes the host wait. With ``virtual_clock=True`` the clocks a learner may read
  (time.time, perf_counter, monotonic, timeit.default_timer, CUDA events) show that timeline,
  so a timing without synchronize, without warm-up, or with copies inside the timed loop gives
  the same wrong numbers it would give on a real GPU — deterministically, whatever the load
  on the grading machine;
* ``torch.cuda`` / ``torch.accelerator`` report one available device and record calls.

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
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from grader.checks.support.meter import MemoryMeter
from grader.checks.support.patching import patched

TAG = "_standin_device"
NAME = "Stand-in GPU (emulated on CPU)"
TOTAL_MEMORY = 16 * 1024**3


@dataclass(frozen=True)
class CostModel:
    """Virtual costs; chosen so that each timing mistake is off by a large factor.

    A matmul of n=512 costs 268 µs on the stand-in and 2.7 ms on the virtual CPU; a launch
    costs the host 10 µs, so timing without synchronize reads ~25x too low; the first matmul
    costs 30 ms more (library load + autotune), so no warm-up reads >20x too high over 5
    repeats; copying both operands in the loop adds 2 x 1 MiB / 12 GB/s = 175 µs (+65 %).
    """

    launch_s: float = 10e-6
    gpu_flops: float = 1e12
    cpu_flops: float = 1e11
    elementwise_bytes_per_s: float = 2e11
    transfer_bytes_per_s: float = 12e9
    first_matmul_s: float = 30e-3

    def matmul_flops(self, out: torch.Tensor, args: tuple[Any, ...]) -> float:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        inner = tensors[-1].shape[-2] if tensors and tensors[-1].dim() >= 2 else 1
        return 2.0 * out.numel() * inner


MATMULS = {"mm", "matmul", "__matmul__", "__rmatmul__", "bmm", "addmm", "linear", "baddbmm"}
# Reading a value back to Python makes the host wait for the device, as on a real GPU.
# Arithmetic worth recording for placement checks (creation and views are not).
ARITHMETIC = {"mul", "add", "sub", "div", "__mul__", "__add__", "__sub__", "__truediv__", "__rmul__", "__radd__",
              "mul_", "add_", "addcmul", "relu", "softmax", "log_softmax", "cross_entropy", "linear", "pow", "exp"}
# Ops that legally take tensors on two devices (a copy across devices, a type query).
MIXED_OK = {"copy_", "_has_compatible_shallow_copy_type", "set_", "is_set_to", "_is_any_true"}
SYNCING = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "__repr__", "__format__", "__str__"}


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


@dataclass(frozen=True)
class Event:
    """Something the learner's code did, in order, for checks to read."""

    kind: str  # "matmul" | "op" | "sync" | "clock" | "h2d" | "d2h" | "empty_cache" | "memory_read" | "mismatch"
    device: str = ""
    host: float = 0.0
    live_bytes: int = 0
    dtype: str = ""


def device_tag(t: torch.Tensor) -> str:
    return getattr(t, TAG, t.device.type)


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


class StandIn:
    """Use as a context manager; ``device`` is what the learner's functions receive."""

    def __init__(self, kind: str = "cuda", costs: CostModel | None = None, virtual_clock: bool = False,
                 budget_bytes: int | None = None) -> None:
        self.kind = kind
        self.device = torch.device(kind)
        self.costs = costs or CostModel()
        self.timeline = Timeline()
        self.events: list[Event] = []
        self.meter = MemoryMeter(budget_bytes, f"{kind}:0 (stand-in)")
        self.virtual_clock = virtual_clock
        self._warm: set[torch.dtype] = set()
        self._stack = contextlib.ExitStack()
        self._reserved = 0

    # -- what checks read ---------------------------------------------------------------
    def matmul_seconds(self, n: int) -> float:
        return 2.0 * n**3 / self.costs.gpu_flops

    def cpu_matmul_seconds(self, n: int) -> float:
        return 2.0 * n**3 / self.costs.cpu_flops

    def record(self, kind: str, device: str = "", dtype: str = "") -> None:
        self.events.append(Event(kind, device, self.timeline.host, self.meter.live_bytes(), dtype))

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
        if prop == f"is_{self.kind}":
            return device_tag(tensor) == self.kind
        if prop == "is_cpu":
            return device_tag(tensor) == "cpu"
        result = func(*args)
        if prop in ("grad", "data", "T", "mT", "H", "mH", "real", "imag") and isinstance(result, torch.Tensor):
            setattr(result, TAG, device_tag(tensor))
        return result

    def move(self, func: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tensor = args[0]
        source = device_tag(tensor)
        if name == "type":
            return func(*args, **kwargs)
        if name in ("cuda", "cpu"):
            target, dtype, non_blocking, memory_format = (self.kind if name == "cuda" else "cpu"), None, False, None
        else:
            copy = kwargs.pop("copy", False)
            device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args[1:], **kwargs)
            kwargs["copy"] = copy
            other = args[1] if len(args) > 1 else kwargs.get("other")
            target = device_tag(other) if isinstance(other, torch.Tensor) else (device.type if device else source)
        options = {"dtype": dtype, "non_blocking": non_blocking, "memory_format": memory_format}
        given = {k: v for k, v in options.items() if v is not None}
        result = torch.Tensor.to(tensor, copy=bool(kwargs.get("copy")), **given)
        if target != source:
            if result is tensor:
                result = tensor.clone()  # a real transfer never returns the same tensor
            nbytes = tensor.numel() * tensor.element_size()
            if target == self.kind:
                self.timeline.run_on_host(self.costs.launch_s)
                self.timeline.launch(nbytes / self.costs.transfer_bytes_per_s, 0.0)
                self.record("h2d", target)
            else:
                self.timeline.synchronize()
                self.timeline.run_on_host(nbytes / self.costs.transfer_bytes_per_s)
                self.record("d2h", target)
        _set_tag(result, target)
        return result

    def op(self, func: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        target: str | None = None
        if "device" in kwargs and kwargs["device"] is not None:
            target = torch.device(kwargs["device"]).type
            if target == self.kind:
                kwargs["device"] = "cpu"
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
        if isinstance(out, torch.Tensor) and device_tag(out) != tag and any(out is t for t in tensors):
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

    # -- torch.cuda / torch.accelerator as the learner sees them ----------------------------
    def synchronize(self, *_: Any, **__: Any) -> None:
        self.timeline.synchronize()
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

    def _clock(self, scale: float = 1.0, offset: float = 0.0, as_int: bool = False) -> Callable[[], Any]:
        def read() -> Any:
            self.record("clock")
            value = (offset + self.timeline.host) * scale
            return int(value) if as_int else value

        return read

    def _patches(self) -> dict[tuple[object, str], object]:
        s = self
        props = types.SimpleNamespace(name=NAME, total_memory=TOTAL_MEMORY, major=8, minor=0,
                                      multi_processor_count=80, is_integrated=False)
        stream = types.SimpleNamespace(synchronize=s.synchronize, query=lambda: True, is_capturing=lambda: False,
                                       wait_stream=lambda *_: None)

        class CudaEvent:
            def __init__(self, enable_timing: bool = False, **_: Any) -> None:
                self.at: float | None = None

            def record(self, *_: Any) -> None:
                s.timeline.run_on_host(s.costs.launch_s)
                self.at = max(s.timeline.host, s.timeline.device_free)

            def synchronize(self) -> None:
                s.timeline.host = max(s.timeline.host, self.at or 0.0)
                s.record("sync", s.kind)

            def query(self) -> bool:
                return s.timeline.host >= (self.at or 0.0)

            def elapsed_time(self, end: CudaEvent) -> float:
                if self.at is None or end.at is None or s.timeline.host < end.at:
                    raise RuntimeError("CUDA error: device not ready (an event was not recorded or not synchronized)")
                return (end.at - self.at) * 1000.0

        cuda = torch.cuda
        patches: dict[tuple[object, str], object] = {
            (cuda, "is_available"): lambda: True,
            (cuda, "device_count"): lambda: 1,
            (cuda, "current_device"): lambda: 0,
            (cuda, "set_device"): lambda *_: None,
            (cuda, "get_device_name"): lambda *_: NAME,
            (cuda, "get_device_capability"): lambda *_: (8, 0),
            (cuda, "get_device_properties"): lambda *_: props,
            (cuda, "is_bf16_supported"): lambda *_, **__: True,
            (cuda, "synchronize"): s.synchronize,
            (cuda, "current_stream"): lambda *_: stream,
            (cuda, "default_stream"): lambda *_: stream,
            (cuda, "Event"): CudaEvent,
            (cuda, "empty_cache"): s.empty_cache,
            (cuda, "memory_allocated"): s.memory_allocated,
            (cuda, "max_memory_allocated"): lambda *_: s.meter.peak,
            (cuda, "memory_reserved"): s.memory_reserved,
            (cuda, "reset_peak_memory_stats"): lambda *_: None,
            (cuda, "set_per_process_memory_fraction"): lambda *_, **__: None,
            (cuda, "mem_get_info"): lambda *_: (TOTAL_MEMORY - s.meter.live_bytes(), TOTAL_MEMORY),
            # Stand-in tensors draw from the CPU generator (torch.manual_seed calls these too).
            (cuda, "manual_seed"): lambda seed: None,
            (cuda, "manual_seed_all"): lambda seed: None,
            (cuda, "is_initialized"): lambda: True,
            (cuda, "is_current_stream_capturing"): lambda: False,
            (torch.backends.mps, "is_available"): lambda: False,
        }
        accel = getattr(torch, "accelerator", None)
        if accel is not None:
            patches.update({
                (accel, "is_available"): lambda: True,
                (accel, "current_accelerator"): lambda *_, **__: torch.device(s.kind),
                (accel, "device_count"): lambda: 1,
                (accel, "current_device_index"): lambda: 0,
                (accel, "synchronize"): s.synchronize,
                (accel, "current_stream"): lambda *_: stream,
            })
            if hasattr(accel, "memory_allocated"):
                patches[(accel, "memory_allocated")] = s.memory_allocated
            if hasattr(accel, "empty_cache"):
                patches[(accel, "empty_cache")] = s.empty_cache
        if self.virtual_clock:
            base = time.time()
            patches.update({
                (time, "time"): self._clock(offset=base),
                (time, "time_ns"): self._clock(1e9, base, as_int=True),
                (time, "perf_counter"): self._clock(),
                (time, "perf_counter_ns"): self._clock(1e9, as_int=True),
                (time, "monotonic"): self._clock(),
                (time, "monotonic_ns"): self._clock(1e9, as_int=True),
                (timeit, "default_timer"): self._clock(),
            })
        return patches

    def __enter__(self) -> StandIn:
        self._stack.enter_context(patched(self._patches()))
        self._stack.enter_context(_amp_on_cpu(self.kind))
        self._stack.enter_context(self.meter)
        self._stack.enter_context(_Mode(self))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


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
