"""What torch._C answers on a machine with one GPU (or a Mac), for PyTorch's own torch.cuda,
torch.mps and torch.accelerator to run on.

torch.cuda, torch.mps and torch.accelerator are Python over a small C layer (torch._C._cuda_*,
_mps_*, _accelerator_*, the Stream/Event base classes, a few module globals that CUDA's
initialisation sets). A CPU build lacks that layer or answers "no device". The stand-in supplies
it, so every public function of those modules is PyTorch's own code, answering as on the device:
memory_summary formats the stand-in's statistics, get_device_name reads its properties,
fork_rng saves its generator, a learner's `from torch.cuda import synchronize` needs no patch.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from grader.emulation.patching import Injected, LearnerCode, Wrap, patched, standing_for
from grader.emulation.surface import LEGACY_DTYPES, default_device_context
from grader.reference.device import CAPABILITY, NAMES, NO_CUDA, TOTAL_MEMORY

MiB = 1024 * 1024
__all__ = ["CudaRuntime", "MpsRuntime", "cpu_build_cuda_patches", "device_type_for", "machine"]


class Device(Protocol):
    """What the C layer answers from: the stand-in's timeline, memory, generator and events."""

    @property
    def kind(self) -> str: ...

    timeline: Any
    costs: Any
    generator: torch.Generator
    peak: int
    peak_reserved: int
    allocations: int
    ooms: int
    capture: list[tuple[Any, Any, Any, Any]] | None

    def synchronize(self) -> None: ...

    def empty_cache(self) -> None: ...

    def live_bytes(self) -> int: ...

    def live_count(self) -> int: ...

    def reserved(self) -> int: ...

    def reset_peak(self) -> None: ...

    def set_allowed(self, allowed: int | None) -> None: ...

    def memory_read(self) -> int: ...

    def record(self, kind: str, device: str = "", dtype: str = "", value: float = 0.0, source: str = "") -> None: ...

    def launch(self, seconds: float) -> None: ...

    def replay(self, records: list[tuple[Any, Any, Any, Any]]) -> None: ...

    def on_device(self, t: torch.Tensor) -> bool: ...


@dataclass(frozen=True)
class GpuFacts:
    """The GPU a single-GPU machine reports (grader/reference/device.py's, which the judge expects)."""

    name: str = NAMES["cuda"]
    capability: tuple[int, int] = CAPABILITY
    total_memory: int = TOTAL_MEMORY
    multi_processor_count: int = 80
    cuda_version: str = "12.8"
    cudnn_version: int = 91002
    arch_flags: str = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"


class DeviceProperties:
    """torch.cuda.get_device_properties(0), as _CudaDeviceProperties answers."""

    def __init__(self, facts: GpuFacts) -> None:
        self.name = facts.name
        self.major, self.minor = facts.capability
        self.total_memory = facts.total_memory
        self.multi_processor_count = facts.multi_processor_count
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.max_threads_per_multi_processor = 2048
        self.warp_size = 32
        self.regs_per_multiprocessor = 65536
        self.shared_memory_per_block = 49152
        self.shared_memory_per_block_optin = 166912
        self.shared_memory_per_multiprocessor = 167936
        self.L2_cache_size = 40 * MiB
        self.clock_rate = 1410000
        self.memory_clock_rate = 1215000
        self.memory_bus_width = 5120
        self.uuid = "00000000-0000-0000-0000-000000000000"
        self.pci_bus_id = self.pci_device_id = self.pci_domain_id = 0
        self.gcnArchName = "NVIDIA CUDA"

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // MiB}MB, multi_processor_count={self.multi_processor_count}, "
                f"uuid={self.uuid}, pci_bus_id={self.pci_bus_id}, pci_device_id={self.pci_device_id}, "
                f"pci_domain_id={self.pci_domain_id}, L2_cache_size={self.L2_cache_size // MiB}MB)")


def _stats(live: int, peak: int, reserved: int, peak_reserved: int, *, count: int, allocations: int,
           ooms: int) -> dict[str, Any]:
    """The caching allocator's statistics, shaped as c10::cuda::CUDACachingAllocator reports them."""
    def stat(current: int, high: int, total: int) -> dict[str, int]:
        return {"current": current, "peak": high, "allocated": total, "freed": total - current}

    def pools(current: int, high: int, total: int) -> dict[str, dict[str, int]]:
        return {"all": stat(current, high, total), "small_pool": stat(0, 0, 0),
                "large_pool": stat(current, high, total)}

    return {
        "allocated_bytes": pools(live, peak, live), "active_bytes": pools(live, peak, live),
        "requested_bytes": pools(live, peak, live), "reserved_bytes": pools(reserved, peak_reserved, reserved),
        "inactive_split_bytes": pools(0, 0, 0), "allocation": pools(count, count, allocations),
        "active": pools(count, count, allocations), "segment": pools(count, count, allocations),
        "inactive_split": pools(0, 0, 0), "num_alloc_retries": 0, "num_ooms": ooms, "num_sync_all_streams": 0,
        "num_device_alloc": allocations, "num_device_free": allocations - count, "max_split_size": -1,
        "oversize_allocations": stat(0, 0, 0), "oversize_segments": stat(0, 0, 0),
    }


def device_stats(s: Device | None) -> dict[str, Any]:
    """The allocator statistics of the stand-in's device (a read, as memory_allocated() is)."""
    if s is None:
        return _stats(0, 0, 0, 0, count=0, allocations=0, ooms=0)
    live = s.memory_read()
    return _stats(live, s.peak, s.reserved(), s.peak_reserved, count=s.live_count(), allocations=s.allocations,
                  ooms=s.ooms)


def _class_with_base(cls: type, base: type) -> Callable[[], None]:
    """Make ``cls`` (torch.cuda.Stream, Event ...) derive from ``base``; returns the undo."""
    old = cls.__bases__
    cls.__bases__ = (base,)
    return lambda: setattr(cls, "__bases__", old)


class CudaRuntime:
    """The C layer of a CUDA build with ``count`` GPUs, answering from the stand-in ``s``
    (its timeline, memory and generator); ``s`` may be None for a world with no tensors (ex1)."""

    def __init__(self, s: Device | None, facts: GpuFacts | None = None, count: int = 1) -> None:
        self.s = s
        self.facts = facts or GpuFacts()
        self.count = count
        self.props = DeviceProperties(self.facts)
        self.current = 0
        self.fraction = 1.0
        self.sync_debug_mode = 0
        self.stream_id = 0
        self.capturing = False
        self.tunable: dict[str, Any] = {"enabled": False, "tuning": True, "record_untuned": False,
                                        "max_duration": 30, "max_iterations": 100, "filename": "tunableop_results.csv",
                                        "rotating_buffer_size": 0}
        self.caching_enabled = True
        self._raw: dict[int, torch.Tensor] = {}
        self._undo: list[Callable[[], None]] = []
        self.injected = Injected()

    # -- answers ---------------------------------------------------------------------------
    def _check(self, device: int) -> int:
        if device < 0:
            device = self.current
        if device >= self.count:
            raise RuntimeError("CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously "
                               "reported at some other API call, so the stacktrace below might be incorrect.")
        return device

    def set_device(self, device: int) -> None:
        self.current = self._check(device)

    def exchange_device(self, device: int) -> int:
        if device < 0:
            return -1
        previous, self.current = self.current, self._check(device)
        return previous

    def synchronize(self) -> None:
        if self.s is not None:
            self.s.synchronize()

    def empty_cache(self) -> None:
        if self.s is not None:
            self.s.empty_cache()

    def memory_stats(self, device: int | None = None) -> dict[str, Any]:
        self._allocator_device(device)
        return device_stats(self.s)

    def _allocator_device(self, device: int | None) -> None:
        """The caching allocator's own check of a device index (CUDACachingAllocator assertValidDevice)."""
        if device is not None and not 0 <= device < self.count and device != -1:
            raise RuntimeError(f"Invalid device argument {device}: did you call init?")

    def mem_get_info(self, device: int | None = None) -> tuple[int, int]:
        self._check(-1 if device is None else device)
        used = self.s.reserved() if self.s is not None else 0
        return self.facts.total_memory - used, self.facts.total_memory

    def reset_peak(self, device: int | None = None) -> None:
        self._allocator_device(device)
        if self.s is not None:
            self.s.reset_peak()

    def stream_tuple(self, device: int | None = None) -> tuple[int, int, int]:
        return self.stream_id, self._check(-1 if device is None else device), 1  # DeviceType CUDA == 1

    def raw_alloc(self, size: int, stream: Any = None) -> int:
        block = torch.empty(size, dtype=torch.uint8, device="cuda") if self.s is not None else torch.empty(size)
        ptr = block.data_ptr()
        self._raw[ptr] = block
        return ptr

    def raw_delete(self, ptr: int) -> None:
        self._raw.pop(ptr, None)

    # -- the layer ---------------------------------------------------------------------------
    def c_functions(self) -> dict[str, object]:
        t = self.tunable
        return {
            "_cuda_getDeviceCount": lambda: self.count,
            "_cuda_init": lambda: None,
            "_cuda_isInBadFork": lambda: False,
            "_cuda_getDevice": lambda: self.current,
            "_cuda_setDevice": self.set_device,
            "_cuda_exchangeDevice": self.exchange_device,
            "_cuda_maybeExchangeDevice": self.exchange_device,
            "_cuda_synchronize": self.synchronize,
            "_cuda_emptyCache": self.empty_cache,
            "_cuda_memoryStats": self.memory_stats,
            "_cuda_resetPeakMemoryStats": self.reset_peak,
            "_cuda_resetAccumulatedMemoryStats": lambda device=None: None,
            "_cuda_hostMemoryStats": lambda: _stats(0, 0, 0, 0, count=0, allocations=0, ooms=0),
            "_cuda_resetPeakHostMemoryStats": lambda: None,
            "_cuda_resetAccumulatedHostMemoryStats": lambda: None,
            "_cuda_setMemoryFraction": self._set_fraction,
            "_cuda_getMemoryFraction": lambda device=None: self.fraction,
            "_cuda_memorySnapshot": lambda *a, **k: {"segments": [], "device_traces": [[]],
                                                     "allocator_settings": {}},
            "_cuda_record_memory_history": lambda *a, **k: None,
            "_cuda_record_memory_history_legacy": lambda *a, **k: None,
            "_cuda_getCurrentStream": self.stream_tuple,
            "_cuda_getDefaultStream": lambda device=None: (0, self._check(-1 if device is None else device), 1),
            "_cuda_setStream": self._set_stream,
            "_cuda_getStreamFromExternal": lambda ptr, device: (ptr, device, 1),
            "_cuda_getArchFlags": lambda: self.facts.arch_flags,
            "_cuda_canDeviceAccessPeer": lambda device, peer: device != peer,
            "_cuda_getCurrentBlasHandle": lambda: 0x5555_0000,
            "_cuda_getCurrentSolverHandle": lambda: 0x5555_1000,
            "_cuda_get_sync_debug_mode": lambda: self.sync_debug_mode,
            "_cuda_set_sync_debug_mode": lambda mode: setattr(self, "sync_debug_mode", int(mode)),
            "_cuda_ipc_collect": lambda: None,
            "_cuda_sleep": self._sleep,
            "_cuda_cudaCachingAllocator_raw_alloc": self.raw_alloc,
            "_cuda_cudaCachingAllocator_raw_delete": self.raw_delete,
            "_cuda_cudaCachingAllocator_enable": lambda value: setattr(self, "caching_enabled", bool(value)),
            "_cuda_cudaCachingAllocator_is_enabled": lambda: self.caching_enabled,
            "_cuda_getAllocatorBackend": lambda: "native",
            "_cuda_getAllocator": lambda: None,
            "_cuda_tunableop_enable": lambda v: t.__setitem__("enabled", bool(v)),
            "_cuda_tunableop_is_enabled": lambda: t["enabled"],
            "_cuda_tunableop_tuning_enable": lambda v: t.__setitem__("tuning", bool(v)),
            "_cuda_tunableop_tuning_is_enabled": lambda: t["tuning"],
            "_cuda_record_untuned_enable": lambda v: t.__setitem__("record_untuned", bool(v)),
            "_cuda_record_untuned_is_enabled": lambda: t["record_untuned"],
            "_cuda_tunableop_set_max_tuning_duration": lambda v: t.__setitem__("max_duration", int(v)),
            "_cuda_tunableop_get_max_tuning_duration": lambda: t["max_duration"],
            "_cuda_tunableop_set_max_tuning_iterations": lambda v: t.__setitem__("max_iterations", int(v)),
            "_cuda_tunableop_get_max_tuning_iterations": lambda: t["max_iterations"],
            "_cuda_tunableop_set_filename": lambda v, insert_device_ordinal=False: t.__setitem__("filename", v),
            "_cuda_tunableop_get_filename": lambda: t["filename"],
            "_cuda_tunableop_get_results": lambda: (),
            "_cuda_tunableop_get_validators": lambda: (),
            "_cuda_tunableop_read_file": lambda filename=None: False,
            "_cuda_tunableop_set_rotating_buffer_size": lambda v: t.__setitem__("rotating_buffer_size", int(v)),
            "_cuda_tunableop_get_rotating_buffer_size": lambda: t["rotating_buffer_size"],
            "_cuda_tunableop_set_numerical_check_tolerances": lambda *a: None,
            "_nccl_version": lambda: 22703,
            "_nccl_version_suffix": lambda: b"",
            "_has_cuda": True,
            "_has_cudnn": True,
            "_has_magma": True,
            "_cuda_isCurrentStreamCapturing": lambda: False,
            "_cuda_getCurrentRawStream": lambda device=None: 0,
            "_host_emptyCache": lambda: None,
            "_cuda_changeCurrentAllocator": lambda allocator: None,
            # One GPU: a collective over one device is a copy (a reduction of one, a gather of one).
            "_nccl_all_reduce": lambda inputs, outputs, *rest: _copy_each(inputs, outputs),
            "_nccl_reduce": lambda inputs, output, root, *rest: output.copy_(inputs[root]),
            "_nccl_broadcast": lambda inputs, root, *rest: None,
            "_nccl_all_gather": lambda inputs, outputs, *rest: _copy_each(inputs, outputs),
            "_nccl_reduce_scatter": lambda inputs, outputs, *rest: _copy_each(inputs, outputs),
            "_nccl_unique_id": lambda: b"\0" * 128,
            "_nccl_init_rank": lambda *a: None,
            # torch.cuda.comm (nn.DataParallel's scatter and gather, replicate's broadcasts): copies
            # between this machine's devices, through the stand-in like any .to().
            "_scatter": self._scatter,
            "_gather": self._gather,
            "_broadcast": lambda tensor, devices: [tensor.to(self._device(d)) for d in devices],
            "_broadcast_coalesced": lambda tensors, devices, buffer_size=0: [
                [t.to(self._device(d)) for t in tensors] for d in devices],
        }

    def _device(self, index: int | None) -> torch.device:
        """A device of this machine by index, as torch.cuda.comm names them (-1: the CPU; None: the current)."""
        return torch.device("cpu") if index == -1 else torch.device("cuda", self._check(-1 if index is None else index))

    def _scatter(self, tensor: torch.Tensor, devices: list[int], chunk_sizes: list[int] | None = None, dim: int = 0,
                 streams: Any = None) -> tuple[torch.Tensor, ...]:
        chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes else tensor.chunk(len(devices), dim)
        return tuple(chunk.to(self._device(d), non_blocking=True) for chunk, d in zip(chunks, devices, strict=False))

    def _gather(self, tensors: list[torch.Tensor], dim: int = 0, destination: int | None = None) -> torch.Tensor:
        return torch.cat([t.to(self._device(destination)) for t in tensors], dim)

    def _sleep(self, cycles: int) -> None:
        if self.s is not None:
            self.s.launch(cycles / 1.41e9)

    def _set_fraction(self, fraction: float, device: int | None = None) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(f"invalid fraction: {fraction}. Please set within [0, 1].")
        self.fraction = fraction
        if self.s is not None:  # the caching allocator's cap: a fraction of the device's whole memory
            self.s.set_allowed(None if fraction >= 1 else int(fraction * self.facts.total_memory))

    def _set_stream(self, stream_id: int, device_index: int, device_type: int) -> None:
        self.stream_id = stream_id

    def __enter__(self) -> CudaRuntime:
        import torch.backends.cudnn
        import torch.cuda
        import torch.cuda.nvtx

        inj = self.injected
        inj.set_all(torch._C, self.c_functions())
        cuda = torch.cuda
        inj.set(cuda, "_initialized", True)
        inj.set(cuda, "_cached_device_count", None)
        # torch.cuda.device_count() asks NVML before the runtime (torch 2.11 even once CUDA is
        # initialized): on a machine with NVIDIA's driver NVML would count the real GPUs.
        inj.set(cuda, "_device_count_nvml", lambda: self.count)
        inj.set(cuda, "_raw_device_count_nvml", lambda: self.count)
        inj.set(cuda, "_is_in_bad_fork", lambda: False)
        inj.set(cuda, "_exchange_device", self.exchange_device)
        inj.set(cuda, "_maybe_exchange_device", self.exchange_device)
        inj.set(cuda, "_get_device_properties", self._properties)
        inj.set(cuda, "_cudart", _CudaRuntimeLibrary(self))
        inj.set(cuda, "has_magma", True)
        generator = self.s.generator if self.s is not None else torch.Generator()
        inj.set(cuda, "default_generators", tuple(generator if i == 0 else torch.Generator()
                                                  for i in range(self.count)))
        inj.set(torch.version, "cuda", self.facts.cuda_version)
        # torch.backends.cudnn is a wrapper module (torch/backends/__init__.py PropModule) around the
        # module whose globals its functions read (version() calls _init()): set there, both see it.
        cudnn = getattr(torch.backends.cudnn, "m", torch.backends.cudnn)
        inj.set(cudnn, "_cudnn", _Cudnn(self.facts.cudnn_version))
        inj.set(cudnn, "__cudnn_version", self.facts.cudnn_version)
        inj.set(cudnn, "_init", lambda: True)
        inj.set(cuda.nvtx, "_nvtx", _Nvtx())
        if self.s is not None:
            for name, cls in legacy_tensor_types().items():
                inj.set(cls, "_device", self.s)
                inj.set(cuda, name, cls)
        inj.set(torch._C, "_mps_is_available", lambda: False)
        inj.set(torch._C, "_has_mps", False)
        inj.set(torch._C, "_accelerator_getAccelerator", lambda: torch.device("cuda"))
        accelerator = AcceleratorRuntime(self.s, "cuda", current=lambda: self.current, set_current=self.set_device,
                                         exchange=self.exchange_device, stats=self.memory_stats,
                                         info=self.mem_get_info)
        inj.set_all(torch._C, accelerator.c_functions())
        if self.s is not None:
            self._undo.append(_class_with_base(cuda.Stream, _stream_base(self)))
            inj.set(torch.Tensor, "record_stream", _record_stream(torch._C.TensorBase.record_stream))
            events = _event_base(self.s, "cuda")  # torch.cuda.Event's base and torch.Event's
            inj.set(torch, "Event", generic_event(events, "cuda"))
            inj.set(torch, "Stream", generic_stream("cuda", cuda.Stream, cuda.Stream))
            self._undo.append(_class_with_base(cuda.Event, events))
            self._undo.append(_class_with_base(cuda.graphs.CUDAGraph, _graph_base(self)))
            self._undo.append(_class_with_base(cuda.memory.MemPool, _pool_base()))
            pools = itertools.count(1)
            inj.set(cuda.graphs, "_graph_pool_handle", lambda: (0, next(pools)))
            inj.set(cuda.graphs, "_cuda_isCurrentStreamCapturing", lambda: self.capturing)
            for name in ("_cuda_beginAllocateCurrentThreadToPool", "_cuda_beginAllocateToPool",
                         "_cuda_endAllocateToPool", "_cuda_releasePool"):
                inj.set(cuda.memory, name, lambda *args: None)
        _clear_availability_caches()
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self.injected.undo()
        _clear_availability_caches()

    def _properties(self, device: int) -> DeviceProperties:
        self._check(device)
        return self.props


class _LegacyTensorType(type):
    """torch.cuda.FloatTensor and its kind on a stand-in: a tensor type that builds tensors on the device,
    and that ``isinstance`` answers for the device's tensors of its dtype. Made once a process
    (``legacy_tensor_types``); a session sets the device it answers for (``_device``) as it sets
    torch.cuda's attributes, and puts it back. (Nine types and their nine metaclasses, made for each
    session, were 0.26 ms of its 1 ms start.)"""

    dtype: torch.dtype
    _device: Device | None

    def __instancecheck__(cls, obj: object) -> bool:
        device = cls._device
        return (device is not None and isinstance(obj, torch.Tensor) and obj.dtype == cls.dtype
                and device.on_device(obj))

    def __call__(cls, *args: Any, **kwargs: Any) -> torch.Tensor:
        device = torch.device("cuda", 0)
        if not args or all(isinstance(a, int) for a in args):
            return torch.empty(*args, dtype=cls.dtype, device=device)
        if len(args) == 1 and isinstance(args[0], torch.Size):
            return torch.empty(args[0], dtype=cls.dtype, device=device)
        return torch.tensor(args[0], dtype=cls.dtype, device=device)

    def __repr__(cls) -> str:
        return f"<class 'torch.cuda.{cls.__name__}'>"


@functools.cache
def legacy_tensor_types() -> Mapping[str, _LegacyTensorType]:
    """The legacy tensor types (``_LegacyTensorType``) by name, FloatTensor to BoolTensor."""
    return types.MappingProxyType({
        f"{name}Tensor": _LegacyTensorType(f"{name}Tensor", (), {
            "dtype": dtype, "_device": None, "is_cuda": True, "is_sparse": False, "__module__": "torch.cuda"})
        for name, dtype in LEGACY_DTYPES.items()})


def default_tensor_type_for(index0: torch.device) -> Wrap:
    """``torch.set_default_tensor_type`` on the CUDA stand-in (deprecated since PyTorch 2.1, still in old scripts:
    ``torch.set_default_tensor_type("torch.cuda.FloatTensor")``, or the type itself). On a GPU's build a CUDA type
    makes its dtype the default and CUDA the default backend, so that factories build on the GPU; this CPU
    build refuses the type ("invalid type object"). Here a CUDA type sets its CPU twin (its dtype, PyTorch's own
    check that it is a floating type, and PyTorch's deprecation warning), then ``index0`` as the default device, a
    default the session ends with as with ``torch.set_default_device`` (grader/emulation/standin.py). A CPU type
    sets its dtype, and the CPU as the default again where a CUDA type had set the device. (A ``Wrap``: the
    function is patched where the learner's code holds it, and ``real`` is a working copy of PyTorch's.)"""

    def make(real: Callable[..., Any]) -> Callable[..., None]:
        made: object = None  # the default-device context a CUDA type set

        def set_default_tensor_type(t: Any, /) -> None:
            nonlocal made
            if isinstance(t, str) and t.startswith("torch.cuda."):
                t = legacy_tensor_types().get(t.removeprefix("torch.cuda."), t)
            if isinstance(t, _LegacyTensorType):
                real(getattr(torch, t.__name__))
                torch.set_default_device(index0)
                made = default_device_context()
                return
            real(t)
            if made is not None and default_device_context() is made:
                torch.set_default_device(None)
            made = None

        return set_default_tensor_type

    return Wrap(make)


def _copy_each(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
    for source, dest in zip(inputs, outputs, strict=True):
        dest.copy_(source)


def _clear_availability_caches() -> None:
    mps = torch.backends.mps
    for func in (getattr(mps, "is_available", None), getattr(mps, "is_macos_or_newer", None)):
        cache_clear = getattr(func, "cache_clear", None)
        if cache_clear is not None:
            cache_clear()


class _CudaError(int):
    """cudaError_t: ``cudaError.success`` and any code."""

    success = 0


class _CudaRuntimeLibrary:
    """torch.cuda.cudart(): the CUDA runtime functions PyTorch's Python calls."""

    cudaError = _CudaError  # noqa: N815 - CUDA's name

    def __init__(self, runtime: CudaRuntime) -> None:
        self.r = runtime

    def cudaMemGetInfo(self, device: int) -> tuple[int, int]:  # noqa: N802 - CUDA's name
        return self.r.mem_get_info(device)

    def cudaProfilerStart(self) -> int:  # noqa: N802
        return 0

    def cudaProfilerStop(self) -> int:  # noqa: N802
        return 0

    def cudaGetErrorString(self, error: int) -> str:  # noqa: N802
        return "no error" if error == 0 else f"CUDA error {error}"

    def cudaHostRegister(self, *args: Any) -> int:  # noqa: N802
        return 0

    def cudaHostUnregister(self, *args: Any) -> int:  # noqa: N802
        return 0

    def cudaStreamCreate(self, *args: Any) -> int:  # noqa: N802
        return 0

    def cudaStreamDestroy(self, *args: Any) -> int:  # noqa: N802
        return 0


class _Cudnn:
    is_cuda = True

    def __init__(self, version: int) -> None:
        self.version = version

    def getVersionInt(self) -> int:  # noqa: N802
        return self.version

    def getRuntimeVersion(self) -> tuple[int, int, int]:  # noqa: N802
        v = self.version
        return v // 10000, v // 100 % 100, v % 100

    getCompileVersion = getRuntimeVersion  # noqa: N815


class _Nvtx:
    """NVTX markers do nothing without a profiler attached: so too here."""

    def __init__(self) -> None:
        self._depth = 0
        self._ids = itertools.count(1)

    def rangePushA(self, msg: str) -> int:  # noqa: N802
        self._depth += 1
        return self._depth - 1

    def rangePop(self) -> int:  # noqa: N802
        self._depth = max(self._depth - 1, 0)
        return self._depth

    def rangeStartA(self, msg: str) -> int:  # noqa: N802
        return next(self._ids)

    def rangeEnd(self, range_id: int) -> None:  # noqa: N802
        return None

    def markA(self, msg: str) -> None:  # noqa: N802
        return None

    def deviceRangeStart(self, msg: str, stream: int = 0) -> int:  # noqa: N802
        return next(self._ids)

    def deviceRangeEnd(self, handle: int, stream: int = 0) -> None:  # noqa: N802
        return None


def _device(runtime: CudaRuntime) -> Device:
    if runtime.s is None:
        raise RuntimeError("CUDA streams, events and graphs need the stand-in's device")
    return runtime.s


def _stream_base(runtime: CudaRuntime) -> type:
    s = _device(runtime)
    ids = itertools.count(3)

    class StreamBase:
        """The C base of torch.cuda.Stream: one ordered queue, the stand-in's timeline."""

        stream_id: int
        device_index: int
        device_type: int
        priority: int
        cuda_stream: int

        def __new__(cls, priority: int = 0, stream_id: int | None = None, device_index: int | None = None,
                    device_type: int | None = None, stream_ptr: int | None = None, **_: Any) -> Any:
            self = object.__new__(cls)
            self.stream_id = next(ids) if stream_id is None else stream_id
            self.device_index = runtime.current if device_index is None else device_index
            self.device_type = 1 if device_type is None else device_type
            self.priority = priority
            self.cuda_stream = stream_ptr if stream_ptr is not None else (0 if self.stream_id == 0 else
                                                                           0x7F00_0000 + self.stream_id)
            return self

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        @property
        def device(self) -> torch.device:
            return torch.device("cuda", self.device_index)

        def query(self) -> bool:
            return bool(s.timeline.host >= s.timeline.device_free)

        def synchronize(self) -> None:
            s.synchronize()

        def wait_event(self, event: Any) -> None:
            return None

        def wait_stream(self, stream: Any) -> None:
            return None

        def is_capturing(self) -> bool:
            return runtime.capturing

        def record_event(self, event: Any = None) -> Any:
            event = event or torch.cuda.Event()
            event.record(self)
            return event

        def __eq__(self, other: object) -> bool:
            return isinstance(other, StreamBase) and other.stream_id == self.stream_id and \
                other.device_index == self.device_index

        def __hash__(self) -> int:
            return hash((self.stream_id, self.device_index))

        @staticmethod
        def priority_range() -> tuple[int, int]:
            return 0, -5

        def __repr__(self) -> str:
            return f"<torch.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"

    return StreamBase


def _record_stream(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tensor.record_stream(stream)`` (a prefetcher's copy on a side stream, NVIDIA Apex's
    data_prefetcher): PyTorch's argument parser takes only its C ``torch.Stream``, which the stand-in's
    ``torch.cuda.Stream`` cannot derive from (a class's base of another layout cannot be swapped in),
    and said "unknown parameter type". The same stream, as the C type, goes on to the dispatcher."""
    def record_stream(self: torch.Tensor, stream: Any) -> Any:
        if isinstance(stream, torch.cuda.Stream):  # the stand-in's (a C torch.Stream of another device passes)
            stream = torch._C.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                                     device_type=stream.device_type)
        return original(self, stream)

    return record_stream


def _graph_base(runtime: CudaRuntime) -> type:
    s = _device(runtime)

    class GraphBase:
        """The C base of torch.cuda.CUDAGraph: capture records the ops the device ran, in order, with
        the very tensors they read and wrote; replay runs them again on those tensors, as a GPU
        replays a graph's kernels on the same memory."""

        records: list[tuple[Any, Any, Any, Any]]

        def __new__(cls, keep_graph: bool = False, **_: Any) -> Any:
            self = object.__new__(cls)
            self.records = []
            return self

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
            self.records.clear()
            s.capture = self.records
            runtime.capturing = True

        def capture_end(self) -> None:
            s.capture = None
            runtime.capturing = False

        def instantiate(self) -> None:
            return None

        def replay(self) -> None:
            s.replay(self.records)

        def reset(self) -> None:
            self.records.clear()

        def pool(self) -> tuple[int, int]:
            return 0, id(self)

        def enable_debug_mode(self) -> None:
            return None

        def debug_dump(self, path: str) -> None:
            return None

        def raw_cuda_graph(self) -> int:
            return 0

        def raw_cuda_graph_exec(self) -> int:
            return 0

    return GraphBase


def _pool_base() -> type:
    ids = itertools.count(1)

    class MemPoolBase:
        """The C base of torch.cuda.MemPool: a private pool's handle (allocations are counted as any)."""

        def __init__(self, allocator: Any = None, is_user_created: bool = True, use_on_oom: bool = False,
                     no_split: bool = False) -> None:
            self._id = (1, next(ids))
            self._allocator = allocator

        @property
        def id(self) -> tuple[int, int]:
            return self._id

        @property
        def allocator(self) -> Any:
            return self._allocator

        def use_count(self) -> int:
            return 1

    return MemPoolBase


def _event_base(s: Device, kind: str) -> type:
    class EventBase:
        """The C base of torch.cuda.Event, on the virtual timeline: recorded when the queue reaches it."""

        enable_timing: bool
        at: float | None
        cuda_event: int

        def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                    external: bool = False, **_: Any) -> Any:
            self = object.__new__(cls)
            self.enable_timing = enable_timing
            self.at = None
            self.cuda_event = 0
            return self

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def record(self, stream: Any = None) -> None:
            s.timeline.run_on_host(s.costs.launch_s)
            self.at = max(s.timeline.host, s.timeline.device_free)
            s.record("clock", value=self.at, source=f"{kind}.Event")

        def wait(self, stream: Any = None) -> None:
            return None

        def query(self) -> bool:
            return self.at is None or s.timeline.host >= self.at

        def synchronize(self) -> None:
            if self.at is not None:
                s.timeline.host = max(s.timeline.host, self.at)
            s.record("sync", kind)

        def elapsed_time(self, end: Any) -> float:
            if not (self.enable_timing and end.enable_timing):
                raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
            if self.at is None or end.at is None:
                raise RuntimeError("Both events must be recorded before calculating elapsed time.")
            if s.timeline.host < end.at:
                raise RuntimeError(f"{kind.upper()} error: device not ready")
            return float(end.at - self.at) * 1000.0

        def ipc_handle(self) -> bytes:
            return b"\0" * 64

        @classmethod
        def from_ipc_handle(cls, device: Any, handle: bytes) -> Any:
            return cls()

    return EventBase


def _named(kind: str, device: Any) -> torch.device:
    """The device ``device`` names on a machine whose accelerator is ``kind`` (torch.Event's and
    torch.Stream's argument): None is the accelerator, an index one of its devices."""
    return torch.device(kind, device) if isinstance(device, int) else torch.device(device or kind)


def generic_event(base: Any, kind: str) -> type:
    """``torch.Event``, the device-generic event of ``torch.accelerator``'s timing idiom
    (``torch.Event(enable_timing=True)`` after ``torch.accelerator.synchronize()``): a C class that
    this CPU build makes only for the CPU, which "doesn't support events". On the stand-in it is the
    device's event (the same clock reads as ``torch.cuda.Event``'s), for ``device`` None (the current
    accelerator) or the stand-in's kind; the CPU's refusal stays PyTorch's. ``base``: the session's
    device event class (``_event_base``), which the device's own event class derives from too."""

    class Event(base):  # type: ignore[misc]
        _device: torch.device

        def __new__(cls, device: Any = None, *, enable_timing: bool = False, blocking: bool = False,
                    interprocess: bool = False) -> Any:
            where = _named(kind, device)
            if where.type != kind:
                if where.type == "cpu":
                    raise RuntimeError("cpu backend doesn't support events.")
                raise RuntimeError(f"PyTorch is not linked with support for {where.type} devices")
            if where.index not in (None, 0):  # one GPU
                raise RuntimeError(f"{kind.upper()} error: invalid device ordinal")
            self = base.__new__(cls, enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)
            self._device = torch.device(kind, 0)
            return self

        @property
        def device(self) -> torch.device:
            return self._device

        def __repr__(self) -> str:
            return f"torch.Event device_type={kind}, device_index={self._device.index}, event_flag=" \
                   f"{'PYTORCH_DEFAULT' if self.enable_timing else 'BACKEND_DEFAULT'}"

    Event.__module__, Event.__qualname__ = "torch", "Event"
    return Event


def generic_stream(kind: str, device_stream: type, make_device_stream: Callable[..., Any]) -> type:
    """``torch.Stream(device)`` on a stand-in: the device's own stream class (``torch.cuda.Stream``, one
    queue on the timeline; MPS's single stream), and ``isinstance(s, torch.Stream)`` holds for every
    stream there, as a GPU build's streams all derive from the C ``torch.Stream``; another device's
    stream is PyTorch's own answer (or its refusal)."""
    real = torch._C.Stream

    def make(device: Any = None, *, priority: int = 0, **kwargs: Any) -> Any:
        where = _named(kind, device)
        if where.type != kind or kwargs:
            return real(device, priority=priority, **kwargs)
        return make_device_stream(device=where, priority=priority)

    return standing_for(real, make, also=(device_stream,))


class AcceleratorRuntime:
    """torch._C's accelerator functions, for torch.accelerator on the stand-in."""

    def __init__(self, s: Any, kind: str, *, current: Callable[[], int], set_current: Callable[[int], None],
                 exchange: Callable[[int], int], stats: Callable[..., dict[str, Any]],
                 info: Callable[..., tuple[int, int]]) -> None:
        self.s, self.kind = s, kind
        self.current, self.set_current, self.exchange = current, set_current, exchange
        self.stats, self.info = stats, info

    def _stream(self, device: int | None = None) -> Any:
        return torch.cuda.current_stream() if self.kind == "cuda" else _MpsStream(self.s)

    def c_functions(self) -> dict[str, object]:
        s = self.s
        dtypes = {torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
                  torch.uint8, torch.bool, torch.complex64}
        if self.kind == "cuda":
            dtypes |= {torch.float64, torch.complex128}
        return {
            "_accelerator_getAccelerator": lambda: torch.device(self.kind),
            "_accelerator_getDeviceIndex": self.current,
            "_accelerator_setDeviceIndex": self.set_current,
            "_accelerator_exchangeDevice": self.exchange,
            "_accelerator_maybeExchangeDevice": self.exchange,
            "_accelerator_synchronizeDevice": lambda device=None: s.synchronize() if s is not None else None,
            "_accelerator_getStream": self._stream,
            "_accelerator_setStream": lambda stream: None,
            "_accelerator_emptyCache": lambda: s.empty_cache() if s is not None else None,
            "_accelerator_emptyHostCache": lambda: None,
            "_accelerator_isAllocatorInitialized": lambda: True,
            "_accelerator_getDeviceStats": self.stats,
            "_accelerator_resetAccumulatedStats": lambda device=None: None,
            "_accelerator_resetPeakStats": lambda device=None: s.reset_peak() if s is not None else None,
            "_accelerator_getMemoryInfo": self.info,
            "_accelerator_getDeviceCapability": lambda device=None: {"supported_dtypes": set(dtypes)},
            "_accelerator_hooks_device_count": lambda: 1,
        }


class _MpsStream:
    def __init__(self, s: Any) -> None:
        self.s = s
        self.device = torch.device("mps", 0)

    def synchronize(self) -> None:
        self.s.synchronize()

    def query(self) -> bool:
        return bool(self.s.timeline.host >= self.s.timeline.device_free)

    def wait_stream(self, other: Any) -> None:
        return None

    def wait_event(self, event: Any) -> None:
        return None

    def is_capturing(self) -> bool:
        return False


class MpsRuntime:
    """The C layer of PyTorch on an Apple GPU (macOS 15), answering from the stand-in ``s``."""

    def __init__(self, s: Device | None, total_memory: int = TOTAL_MEMORY, macos: tuple[int, int] = (15, 0)) -> None:
        self.s = s
        self.total = total_memory
        self.macos = macos
        self.fraction = 0.0
        self._events: dict[int, Any] = {}
        self._ids = itertools.count(1)
        self.injected = Injected()
        # the device's events (torch.mps.Event's and torch.Event's), one class a session
        self._event_class = _event_base(s, "mps") if s is not None else None

    def c_functions(self) -> dict[str, object]:
        s = self.s
        return {
            "_has_mps": True,
            "_mps_is_available": lambda: True,
            "_mps_is_on_macos_or_newer": lambda major, minor: (major, minor) <= self.macos,
            "_mps_get_name": lambda: NAMES["mps"],
            "_mps_get_core_count": lambda: 10,
            "_mps_deviceSynchronize": lambda: s.synchronize() if s is not None else None,
            "_mps_emptyCache": lambda: s.empty_cache() if s is not None else None,
            "_mps_currentAllocatedMemory": lambda: s.memory_read() if s is not None else 0,
            "_mps_driverAllocatedMemory": lambda: s.reserved() if s is not None else 0,
            "_mps_recommendedMaxMemory": lambda: self.total,
            "_mps_setMemoryFraction": self._set_fraction,
            "_mps_get_default_generator": lambda: s.generator if s is not None else torch.Generator(),
            "_mps_acquireEvent": self._acquire,
            "_mps_releaseEvent": self._release,
            "_mps_recordEvent": lambda event_id: self._events[event_id].record(),
            "_mps_waitForEvent": lambda event_id: None,
            "_mps_synchronizeEvent": lambda event_id: self._events[event_id].synchronize(),
            "_mps_queryEvent": lambda event_id: self._events[event_id].query(),
            "_mps_elapsedTimeOfEvents": lambda a, b: self._events[a].elapsed_time(self._events[b]),
            "_mps_profilerStartTrace": lambda *a, **k: None,
            "_mps_profilerStopTrace": lambda *a, **k: None,
            "_mps_isCaptureEnabled": lambda: False,
            "_mps_isCapturing": lambda: False,
        }

    def _memory_info(self, device: int | None = None) -> tuple[int, int]:
        used = self.s.reserved() if self.s is not None else 0
        return self.total - used, self.total

    def _set_fraction(self, fraction: float) -> None:
        if not 0 <= fraction <= 2:
            raise ValueError(f"invalid fraction: {fraction}. Please set within [0, 2].")
        self.fraction = fraction
        if self.s is not None:  # of the recommended working set; 0 lifts the cap
            self.s.set_allowed(None if fraction == 0 else int(fraction * self.total))

    def _release(self, event_id: int) -> None:
        self._events.pop(event_id, None)
        _ISSUED.discard(event_id)

    def _acquire(self, enable_timing: bool) -> int:
        event_id = next(self._ids) + 1_000_000
        _ISSUED.add(event_id)
        if self._event_class is None:
            raise RuntimeError("MPS events need the stand-in's device")
        self._events[event_id] = self._event_class(enable_timing=enable_timing)
        return event_id

    def __enter__(self) -> MpsRuntime:
        import torch.mps

        _tolerate_late_event_release()
        inj = self.injected
        inj.set_all(torch._C, self.c_functions())
        inj.set(torch.mps, "_default_mps_generator", None)
        if self._event_class is not None:  # a stand-in's device (not ex1's world with no tensors)
            inj.set(torch, "Event", generic_event(self._event_class, "mps"))
            inj.set(torch, "Stream", generic_stream("mps", _MpsStream, lambda **_: _MpsStream(self.s)))
        accelerator = AcceleratorRuntime(self.s, "mps", current=lambda: 0, set_current=lambda i: None,
                                         exchange=lambda i: 0, stats=lambda device=None: device_stats(self.s),
                                         info=self._memory_info)
        inj.set_all(torch._C, accelerator.c_functions())
        _clear_availability_caches()
        return self

    def __exit__(self, *exc: object) -> None:
        self.injected.undo()
        _clear_availability_caches()


_ISSUED: set[int] = set()


def _tolerate_late_event_release() -> None:
    """A torch.mps.Event made on the stand-in releases its id when collected, maybe after the stand-in
    ended: that release must not reach a CPU build's C layer (which raises inside __del__)."""
    release = torch._C._mps_releaseEvent
    if getattr(release, "tolerant", False):
        return

    def tolerant_release(event_id: int) -> Any:
        if event_id in _ISSUED:
            _ISSUED.discard(event_id)
            return None
        return release(event_id)

    tolerant_release.tolerant = True  # type: ignore[attr-defined]
    torch._C._mps_releaseEvent = tolerant_release


def device_type_for(kind: str) -> type:
    """``torch.device`` as it behaves on a machine whose accelerator is ``kind``: ``torch.device(0)``
    (fastai's ``torch.device(torch.cuda.current_device())``) is that accelerator's device 0 — a CPU
    build's C++ asks for an accelerator it does not have. It makes real ``torch.device`` objects, and
    ``isinstance(x, torch.device)`` still holds (``standing_for``)."""
    real = torch.device

    def make(*args: Any, **kwargs: Any) -> torch.device:
        if args and isinstance(args[0], int) and not isinstance(args[0], bool):
            return real(kind, args[0])
        return real(*args, **kwargs)

    return standing_for(real, make)


@contextlib.contextmanager
def machine(code: LearnerCode, *, cuda: bool, mps: bool, mps_built: bool = False,
            cuda_count: int = 1) -> Iterator[None]:
    """For the duration, torch's C layer is a machine with these devices (and no tensors on them):
    CUDA's with ``cuda_count`` GPUs, a Mac's, or a CPU build's — with ``mps_built``, a Mac whose
    PyTorch has MPS built in but cannot use it."""
    real_cuda = torch.cuda.is_available()
    with contextlib.ExitStack() as stack:
        if cuda:
            stack.enter_context(CudaRuntime(None, count=cuda_count))
        elif mps:
            stack.enter_context(MpsRuntime(None))
        inj = Injected()
        stack.callback(inj.undo)  # before the runtime's own undo: what it saved is the original
        if cuda:
            inj.set(torch._C, "_mps_is_available", lambda: mps)
            inj.set(torch._C, "_has_mps", mps or mps_built)
        elif not mps:
            inj.set(torch._C, "_mps_is_available", lambda: False)
            inj.set(torch._C, "_has_mps", mps_built)
            inj.set(torch._C, "_accelerator_getAccelerator", lambda: None)
        replacements: dict[tuple[object, str], object] = {}
        if cuda or mps:
            replacements[(torch, "device")] = device_type_for("cuda" if cuda else "mps")
        if real_cuda and not cuda:
            replacements.update(cpu_build_cuda_patches())
        stack.enter_context(patched(replacements, code))
        _clear_availability_caches()
        stack.callback(_clear_availability_caches)
        yield


def _no_cuda(*_: Any, **__: Any) -> Any:
    raise AssertionError(NO_CUDA)


def cpu_build_cuda_patches() -> dict[tuple[object, str], object]:
    """torch.cuda as a PyTorch built without CUDA has it (a Mac, a CPU box), on a machine that has CUDA."""
    cuda = torch.cuda
    patches: dict[tuple[object, str], object] = {
        (cuda, "is_available"): lambda: False, (cuda, "device_count"): lambda: 0,
        (cuda, "is_initialized"): lambda: False}
    for name in ("current_device", "set_device", "get_device_name", "get_device_capability", "get_device_properties",
                 "synchronize", "mem_get_info", "current_stream", "default_stream", "init"):
        patches[(cuda, name)] = _no_cuda
    return patches
