"""An accelerator emulated on the CPU, so that a machine without a GPU still grades devices.

The learner's code receives ``torch.device("cuda")`` — or ``torch.device("mps")``: a stand-in of
each kind, so that every device branch a learner writes runs. The stand-in is built at the layers
where PyTorch itself defines a device's semantics, not from the Python names code happens to call:

* **the dispatcher** (``run``, a TorchDispatchMode): every aten op, forward and backward, factories
  asked for ``device="cuda"`` included. Where a tensor lives is a property of its *storage*
  (``nn.Parameter(t)``, ``.data``, views and ``detach()`` share it, so ``nn.Linear(...,
  device="cuda")`` is on the device); an op's outputs live where its inputs do; mixing a device
  tensor with a (non-scalar) CPU tensor raises PyTorch's "Expected all tensors to be on the same
  device"; copies between devices are transfers; each op costs what it computes (the FLOP counter's
  formulas for products, convolutions and attention, the bytes it moves for the rest) on a virtual
  timeline; the device's live bytes, peak and out-of-memory budget are counted per storage; device
  random numbers come from the device's own generator. Tensors stay plain CPU tensors (no
  subclass), so autograd works: design.md notes that a wrapper subclass claiming device cuda aborts
  the process inside autograd on a CPU build.
* **the tensor's Python surface** (grader/emulation/surface.py): ``.device``, ``.is_cuda``, repr,
  ``.numpy()``, and the copies whose aliasing C++ decides from the real (CPU) device.
* **the device's C layer** (grader/emulation/runtime.py): what ``torch._C`` answers on a
  single-GPU machine (or a Mac), so that ``torch.cuda``, ``torch.mps`` and ``torch.accelerator``
  are PyTorch's own Python, whole.
* **generators** (grader/emulation/generators.py): ``torch.Generator(device="cuda")``, and PyTorch's
  error for a generator handed to an op on the other device.
* **storages** (grader/emulation/storages.py): a device tensor's storage says it is on the device,
  and storages made there (``torch.load(map_location="cuda")``, ``storage.cuda()``) are the device's.
* **autocast** (grader/emulation/autocast.py): the emulated device's autocast policy.
* **the clocks** (grader/emulation/clocks.py): with ``virtual_clock=True`` every clock of the
  standard library reads the virtual timeline, deterministically, however loaded the machine is.

PyTorch keeps modes per thread; a GPU is the whole process's. Every thread started while a stand-in is
open (a DataLoader's pin-memory thread, a thread pool's workers) enters its surface and dispatcher too
(``_every_thread``), and keeps its own per-call contexts; autocast and the default device, per thread
in PyTorch, start afresh there as on a GPU.

Kernels are asynchronous: launching costs the host a few microseconds, the kernel finishes later,
and only a synchronize (``.item()``, a blocking ``.cpu()`` …) makes the host wait. A device→host
copy with ``non_blocking=True`` lands only at the next synchronize: read before, it holds zeros,
as on a GPU it would hold whatever was there.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grader.emulation import ops
from grader.emulation.autocast import DeviceAutocast, kernels
from grader.emulation.clocks import VirtualClocks, held_as_default
from grader.emulation.generators import DeviceGenerator, generator_type_for
from grader.emulation.patching import NO_LEARNER_CODE, LearnerCode, Target, patched
from grader.emulation.runtime import (
    CudaRuntime,
    MpsRuntime,
    cpu_build_cuda_patches,
    default_tensor_type_for,
    device_type_for,
)
from grader.emulation.storages import device_storages
from grader.emulation.surface import Call, Surface, default_device_context, device_type_name
from grader.reference import modes
from grader.reference.device import MPS_FLOAT64, NO_CUDA, TOTAL_MEMORY, CostModel
from grader.reference.meter import MemoryMeter, Storages, counted, never_compiled, storage_key, tensors
from grader.reference.modes import LeavesFromUnder
from grader.wire.messages import DeviceMode, Event
from grader.wire.values import real_device

Kind = Literal["cuda", "mps"]
Place = Literal["device", "pinned", "cpu"]
MiB = 1024 * 1024
aten = ops.aten
# The CPU allocator's words when it cannot (c10/core/impl/alloc_cpu.cpp): "DefaultCPUAllocator: can't
# allocate memory: you tried to allocate 4000000000000 bytes."
_HOST_REFUSED = re.compile(r"can't allocate memory: you tried to allocate (\d+) bytes")
__all__ = ["Kind", "StandIn", "cpu_build_cuda_patches"]


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


def _storage(t: torch.Tensor) -> Any:
    """The storage that says where ``t`` lives (a sparse tensor's: its values')."""
    layout = t.layout
    if layout == torch.strided:
        return t.untyped_storage()
    if layout == torch.sparse_coo:
        return t._values().untyped_storage()
    return t.values().untyped_storage()


def _keyed(t: torch.Tensor) -> tuple[Any, int] | None:
    """``t``'s storage and the key the stand-in holds it by (its address); None for a tensor of no
    storage on the CPU (the meta device's, a real GPU's, a wrapper subclass without one)."""
    with torch._C.DisableTorchFunction():
        if not t.is_cpu:  # (five times as fast as t.device.type: a torch.device is built each read)
            return None
        try:
            storage = _storage(t)
        except (RuntimeError, NotImplementedError):
            return None
        return storage, int(storage._cdata)


def _key(t: torch.Tensor) -> int | None:
    """The key the stand-in holds ``t``'s storage by, as ``_keyed`` gives it; asked for every tensor of
    every op. A key that no held storage has is no answer on its own: the meta device's, a real GPU's
    storages are never held (and a held storage's address is never another's while the stand-in keeps its
    weak reference), so such a tensor is found nowhere, as ``_keyed``'s None says."""
    key = storage_key(t)
    if key is not None:
        return key
    keyed = _keyed(t)  # (sparse: its values' storage)
    return None if keyed is None else keyed[1]


def _host_refused(exc: RuntimeError) -> int | None:
    """The bytes the CPU allocator refused, when ``exc`` is its "can't allocate memory"; else None."""
    found = _HOST_REFUSED.search(str(exc))
    return int(found.group(1)) if found else None


def widened(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: list[torch.Tensor]) -> Any:
    """A product whose operands are all of one 16-bit dtype, computed as a GPU's tensor cores (and
    cuBLAS's default, float32 accumulation) compute it: the operands widened to float32 (exact), the
    products summed in float32, the result rounded once to the 16-bit dtype. This CPU build's own
    16-bit kernels round the same way but take 30 times as long as float32 (measured here: 880 vs 27
    ms for a 4096x256 @ 256x256 product), which made the AMP checks the slowest of the course.
    Mixed dtypes run as they are, so that PyTorch raises its own error for them."""
    dtypes = {t.dtype for t in inputs}
    if len(dtypes) != 1 or not dtypes <= ops.HALF_DTYPES:
        return func(*args, **kwargs)
    (dtype,) = dtypes
    wide = tuple(a.float() if isinstance(a, torch.Tensor) else a for a in args)
    return func(*wide, **kwargs).to(dtype)


class _Dispatch(LeavesFromUnder, TorchDispatchMode):
    def __init__(self, device: StandIn) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.device = device

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in dynamo.disable, whose first call imports
        # torch._dynamo: seconds per graded submission, for compilation we never do.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        device = self.device
        if device.meters:  # a call's meters count here, not as modes of their own (grader/reference/meter.py)
            return counted(device.meters, device.run, (func, args, kwargs or {}), {})
        return device.run(func, args, kwargs or {})


class StandIn:
    """Use as a context manager; ``device`` is what the learner's functions receive."""

    mode: DeviceMode = "standin"
    virtual = True

    def __init__(self, kind: Kind = "cuda", costs: CostModel | None = None, *, virtual_clock: bool = False,
                 budget_bytes: int | None = None, typed_oom: bool = False,
                 code: LearnerCode = NO_LEARNER_CODE) -> None:
        self.kind = kind
        self.device = torch.device(kind)
        self.index0 = torch.device(kind, 0)
        self.label = f"{kind} (stand-in)"
        self.costs = costs or CostModel()
        self.timeline = Timeline()
        self.events: list[Event] = []
        self.budget = budget_bytes
        # Where the learner's code capped the device's memory (set_per_process_memory_fraction): ``capacity``
        self.allowed: int | None = None
        # MPS runs out of memory with a plain RuntimeError; ``typed_oom`` makes it CUDA's
        # torch.OutOfMemoryError, for a check about what to do *after* an OOM on each device.
        self.untyped_oom = kind == "mps" and not typed_oom
        self.virtual_clock = virtual_clock
        self.code = code
        # the device's own, seeded as CUDA's default generator is
        self.generator: torch.Generator = DeviceGenerator(self.index0)
        self._thread = _PerThread()  # each thread's own torch-function calls (``contexts``)
        self.capture: list[tuple[Any, Any, Any, Any]] | None = None  # a CUDA graph being captured
        self.peak = 0
        self.peak_reserved = 0
        self.allocations = 0
        self.ooms = 0
        self.meters: list[MemoryMeter] = []  # a call's meters, counting every op's output after the device
        self._storages = Storages()  # the device's storages, and page-locked host memory (uncounted)
        self._reserved = 0
        self._warm: set[torch.dtype] = set()
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # non_blocking copies to the host
        self._stack = contextlib.ExitStack()
        self._autocast_kernels = kernels()
        self._no_autocast = self._autocast_kernels.excluded  # the autocast keys the device's CPU kernels never reach

    @property
    def contexts(self) -> list[Call]:
        """This thread's torch-function calls under way, innermost last (the surface's)."""
        return self._thread.contexts

    def _in_device_call(self) -> bool:
        """Whether the innermost torch-function call under way has its tensors on the device."""
        contexts = self._thread.contexts
        return bool(contexts) and contexts[-1].on_device(self)

    # -- where tensors live -----------------------------------------------------------------
    def where(self, t: torch.Tensor) -> Place:
        key = _key(t)
        if key is None:
            return "cpu"
        stored = self._storages.alive(key)
        if stored is None:
            return "cpu"
        return "device" if stored.counted else "pinned"

    def on_device(self, t: torch.Tensor) -> bool:
        return self.where(t) == "device"

    def holds(self, storage: torch.UntypedStorage) -> bool:
        """Whether ``storage`` is one of the device's (a device tensor's)."""
        stored = self._storages.alive(int(storage._cdata))
        return stored is not None and stored.counted

    def device_of(self, t: torch.Tensor) -> str:
        """The device type a tensor reports (what crosses to the judge)."""
        return self.kind if self.on_device(t) else real_device(t)

    def adopt(self, t: torch.Tensor) -> torch.Tensor:
        """A tensor the judge sent, created on the device (no transfer is recorded)."""
        with modes.off():
            placed = t.detach().clone().requires_grad_(t.requires_grad)
        self._place(placed, on_device=True)
        return placed

    def _place(self, t: torch.Tensor, on_device: bool) -> int:
        """Record ``t``'s storage as the device's (or pinned); the bytes newly on the device."""
        key = _key(t)
        if key is None or self._storages.alive(key) is not None:  # (most outputs of an op in place, or views)
            return 0
        keyed = _keyed(t)
        if keyed is None:
            return 0
        storage, key = keyed
        size = int(storage.nbytes())
        self._storages.add(key, storage, size, counted=on_device)  # (a freed storage's address reused: replaced)
        if not on_device:
            return 0
        self.allocations += 1
        return size

    # -- memory, as the caching allocator reports it ---------------------------------------------
    def live_bytes(self) -> int:
        """The device's bytes still alive (asked at every allocating op)."""
        return self._storages.live_bytes()

    def live_count(self) -> int:
        return self._storages.count()

    def reserved(self, live: int | None = None) -> int:
        """The caching allocator keeps what was freed until empty_cache(); ``live``: ``live_bytes()``
        when the caller has just computed it."""
        self._reserved = max(self._reserved, self.live_bytes() if live is None else live)
        self.peak_reserved = max(self.peak_reserved, self._reserved)
        return self._reserved

    def reset_peak(self) -> None:
        self.peak = self.live_bytes()
        self.peak_reserved = self.reserved()

    def memory_read(self) -> int:
        self.record("memory_read", self.kind)
        return self.live_bytes()

    def empty_cache(self) -> None:
        self._reserved = self.live_bytes()
        self.record("empty_cache", self.kind)

    def fill_capacity(self, chunk_bytes: int) -> int:
        return (self.budget or 0) // chunk_bytes

    def set_allowed(self, allowed: int | None) -> None:
        """The learner's own cap on this process's device memory (``torch.cuda`` / ``torch.mps``
        ``.set_per_process_memory_fraction``): an allocation past it is out of memory, as PyTorch's
        allocators make it; None lifts it."""
        self.allowed = allowed

    @property
    def total(self) -> int:
        """What the device holds: the check's budget, else the whole memory the stand-in reports (a 20 GiB
        allocation on the "16 GiB" GPU is out of memory on a laptop too, where no limit of the grader's
        makes the host refuse it first)."""
        return self.budget if self.budget is not None else TOTAL_MEMORY

    @property
    def capacity(self) -> int:
        """What the device holds: its memory (or the check's budget), or the learner's cap below it."""
        return self.total if self.allowed is None else min(self.total, self.allowed)

    def _oom(self, asked: int, live: int) -> BaseException:
        if self.untyped_oom:
            return RuntimeError(
                f"MPS backend out of memory (MPS allocated: {live / MiB:.2f} MB, other allocations: 0 bytes, "
                f"max allowed: {self.capacity / MiB:.2f} MB). Tried to allocate {asked / MiB:.2f} MB on private pool "
                "(the grader's memory budget on its mps stand-in).")
        allowed = "" if self.allowed is None else f"{self.allowed / MiB:.2f} MiB allowed; "
        return torch.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {asked / MiB:.2f} MiB. GPU 0 has a total capacity of "
            f"{self.total / MiB:.2f} MiB of which {max(self.total - live, 0) / MiB:.2f} MiB is free. {allowed}Of the "
            f"allocated memory {live / MiB:.2f} MiB is allocated by PyTorch (the grader's memory budget on its "
            f"{self.kind}:0 (stand-in)).")

    # -- the dispatcher --------------------------------------------------------------------------
    def target(self, device: Any) -> bool:
        """Whether ``device`` is this stand-in (else the CPU, or the meta device every build has: deferred
        initialization, ``to_empty``); raises what the machine raises for any other."""
        dev = device if isinstance(device, torch.device) else torch.device(device)
        if dev.type in ("cpu", "meta"):
            return False
        if dev.type == self.kind:
            if dev.index not in (None, 0):
                raise RuntimeError(f"{'CUDA' if self.kind == 'cuda' else 'MPS'} error: invalid device ordinal")
            return True
        if dev.type == "cuda":
            raise AssertionError(NO_CUDA)
        raise RuntimeError(f"PyTorch is not linked with support for {dev.type} devices")

    def names(self, device: Any) -> bool:
        """Whether ``device`` (a torch.device or its spelling) is this stand-in — False for what is
        not a device at all, PyTorch's error for an index it does not have (``target``)."""
        try:
            dev = device if isinstance(device, torch.device) else torch.device(device)
        except (RuntimeError, TypeError):
            return False
        return dev.type == self.kind and self.target(dev)

    def run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One aten op, as the emulated machine runs it."""
        to_device: bool | None = None
        pinned = False
        if kwargs:  # (most ops have none)
            if kwargs.get("device") is not None:
                if kwargs["device"].type == "meta":  # shapes only: no memory, no kernel, no transfer
                    return func(*args, **kwargs)
                to_device = self.target(kwargs["device"])
                if to_device:
                    kwargs = {**kwargs, "device": torch.device("cpu")}
            if kwargs.get("pin_memory"):
                kwargs = {**kwargs, "pin_memory": False}
                pinned = True
        op = ops.classify(func)
        inputs = tensors((args, kwargs) if kwargs else args)
        where = self.where
        places = [where(t) for t in inputs]
        on_device = "device" in places
        if op.aliases and not kwargs and len(places) == 1:
            return self._view(func, op, args, inputs, on_device=on_device)
        if func is aten.is_pinned.default:
            return bool(places) and places[0] == "pinned"
        if func is aten._pin_memory.default:
            if places and places[0] == "device":  # ATen's check (native/Memory.cpp): CPU tensors only
                raise RuntimeError(f"cannot pin '{device_type_name(args[0], self.kind)}' only dense CPU tensors "
                                   "can be pinned")
            copy = args[0].clone()
            self._place(copy, on_device=False)
            return copy
        if func is aten.record_stream.default:  # the caching allocator's bookkeeping: nothing to emulate
            if not places or places[0] != "device":  # a CUDA kernel only, as in ATen
                raise NotImplementedError("Could not run 'aten::record_stream' with arguments from the 'CPU' "
                                          "backend.")
            return None
        if func in ops.QUERIES:
            return func(*args, **kwargs)
        if op.cudnn and self.kind == "cuda":
            return self.run(*ops.CUDNN[func](*args, **kwargs))
        if on_device and not op.transfer and ("cpu" in places or "pinned" in places):  # (all on the device: none mix)
            self._check_mixing(op, args, inputs, places)
        if to_device is False and self._in_device_call():
            # C++ building a tensor from a device tensor's options (whose device is the real
            # one, the CPU) inside a call on device tensors: it is on the device there.
            to_device = True
        if to_device is None:
            if op.transfer:
                to_device = places[0] == "device"
            else:
                to_device = on_device if inputs else self._in_device_call()
        if to_device and func is aten._to_copy.default:
            self._check_dtype(kwargs.get("dtype") or args[0].dtype)
        host_copy = None
        if func is aten.copy_.default and len(places) > 1 and places[0] != "device" and places[1] == "device" \
                and len(args) > 2 and args[2]:
            host_copy = args[0].clone()  # a non-blocking copy to the host lands at the next synchronize
        try:
            out = self._kernel(func, op, args, kwargs, inputs, to_device=to_device)
        except RuntimeError as exc:
            # What the host could not allocate for a device op, the device could not either: the
            # device's out-of-memory error (one torch.empty of 4 TB: the CPU allocator's words, which
            # no `except torch.OutOfMemoryError` catches, before the budget is ever asked).
            asked = _host_refused(exc) if to_device else None
            if asked is None:
                raise
            self.ooms += 1
            raise self._oom(asked, self.live_bytes()) from None
        if host_copy is not None:
            self._pending.append((args[0], args[0].clone()))
            args[0].copy_(host_copy)
        elif func is aten._to_copy.default and not to_device and places and places[0] == "device" \
                and kwargs.get("non_blocking") and isinstance(out, torch.Tensor):
            landed, out = out, torch.zeros_like(out)
            self._pending.append((out, landed))
        outputs = tensors(out)
        self._allocate(outputs, to_device, pinned)
        self._account(func, op, args, kwargs, to_device=to_device, places=places, out=out, inputs=inputs,
                      outputs=outputs)
        if self.capture is not None and to_device:
            self.capture.append((func, args, kwargs, out))
        return out

    def _view(self, func: Any, op: ops.Op, args: tuple[Any, ...], inputs: list[torch.Tensor], *,
              on_device: bool) -> Any:
        """A view of one tensor (detach, t, view, split ...; a quarter of a training's ops), as ``run`` would
        take it, quicker: its outputs are its input's storage, on the device exactly when it is and placed
        with it already, so nothing is allocated, launched, recorded or mixed; on MPS a view as a dtype
        the device has not is refused all the same."""
        out = self._kernel(func, op, args, {}, inputs, to_device=on_device)
        if on_device:
            self._refuse_dtypes(tensors(out))
            if self.capture is not None:
                self.capture.append((func, args, {}, out))
        return out

    def _kernel(self, func: Any, op: ops.Op, args: tuple[Any, ...], kwargs: dict[str, Any],
                inputs: list[torch.Tensor], *, to_device: bool) -> Any:
        """The op's CPU kernel, as the device computes it. A GPU's kernels do not call back into autocast;
        this CPU build's kernels call other ops through the dispatcher, which must not be autocast again:
        where an autocast kernel can run at all (``Kernels.reachable``), its keys are excluded."""
        if self._autocast_kernels.reachable():
            with torch._C._ExcludeDispatchKeyGuard(self._no_autocast):
                return self._device_kernel(func, op, args, kwargs, inputs, to_device=to_device)
        return self._device_kernel(func, op, args, kwargs, inputs, to_device=to_device)

    def _device_kernel(self, func: Any, op: ops.Op, args: tuple[Any, ...], kwargs: dict[str, Any],
                       inputs: list[torch.Tensor], *, to_device: bool) -> Any:
        """Its random numbers from the device's generator, 16-bit products widened (``widened``)."""
        if to_device and op.random and kwargs.get("generator") is None:
            with self._device_random():
                return func(*args, **kwargs)
        if to_device and op.product:
            return widened(func, args, kwargs, inputs)
        return func(*args, **kwargs)

    def _allocate(self, outputs: list[torch.Tensor], to_device: bool, pinned: bool) -> None:
        if not to_device:
            if pinned:
                for t in outputs:
                    self._place(t, on_device=False)
            return
        self._refuse_dtypes(outputs)
        new = 0
        for t in outputs:
            new += self._place(t, on_device=True)
        if not new:
            return
        live = self.live_bytes()
        if live > self.capacity:
            for t in outputs:
                keyed = _keyed(t)
                if keyed is not None:
                    self._storages.forget(keyed[1])
            self.ooms += 1
            raise self._oom(new, live - new)
        self.peak = max(self.peak, live)
        self.reserved(live)

    def _refuse_dtypes(self, outputs: list[torch.Tensor]) -> None:
        """Outputs on the device in a dtype it has not (MPS: float64) are refused."""
        if self.kind == "mps":
            for t in outputs:
                self._check_dtype(t.dtype)

    def _check_dtype(self, dtype: torch.dtype) -> None:
        if self.kind == "mps" and dtype in (torch.float64, torch.complex128):
            raise TypeError(MPS_FLOAT64)

    def _check_mixing(self, op: ops.Op, args: tuple[Any, ...], inputs: list[torch.Tensor], places: list[Place]) -> None:
        skip: set[int] = set()
        if op.indexing and len(args) > 1:
            skip = {id(t) for t in tensors(args[1])}
        for t, place in zip(inputs, places, strict=True):
            if place != "device" and t.dim() > 0 and id(t) not in skip:
                self.record("mismatch")
                raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                                   f"{self.kind}:0 and cpu!")

    @contextlib.contextmanager
    def _device_random(self) -> Iterator[None]:
        """Random numbers from the device's generator (torch.cuda.manual_seed seeds it, torch.manual_seed both)."""
        cpu = torch.default_generator.get_state()
        torch.default_generator.set_state(self.generator.get_state())
        try:
            yield
        finally:
            self.generator.set_state(torch.default_generator.get_state())
            torch.default_generator.set_state(cpu)

    def _account(self, func: Any, op: ops.Op, args: tuple[Any, ...], kwargs: dict[str, Any], *, to_device: bool,
                 places: list[Place], out: Any, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        """The op's cost on the virtual timeline, and the events checks read (``inputs``: the
        tensors of ``args`` and ``kwargs``, ``outputs``: of ``out``)."""
        c = self.costs
        if op.transfer and places:
            source = places[0] if func is aten._to_copy.default else places[-1]
            dest = "device" if to_device else "cpu"
            size = ops.nbytes(outputs[:1])
            if source != "device" and dest == "device":
                self.timeline.run_on_host(c.launch_s)
                self.timeline.launch(size / c.transfer_bytes_per_s, 0.0)
                self.record("h2d", self.kind)
                return
            if source == "device" and dest != "device":
                if kwargs.get("non_blocking") or (func is aten.copy_.default and len(args) > 2 and args[2]):
                    self.timeline.launch(size / c.transfer_bytes_per_s, c.launch_s)
                    self.record("d2h_async", "cpu")
                else:
                    self.timeline.synchronize()
                    self.timeline.run_on_host(size / c.transfer_bytes_per_s)
                    self.record("d2h", "cpu")
                return
        if places and places[0] == "device" and (func is aten._local_scalar_dense.default
                                                 or op.syncing):
            self.timeline.synchronize()  # the host waits for a value (item, nonzero ...)
        if not outputs or not op.computes:
            return
        work = ops.flops(op, args, kwargs, out)
        if to_device:
            kernel = max(work / c.gpu_flops, (ops.nbytes(inputs) + ops.nbytes(outputs))
                         / c.elementwise_bytes_per_s)
            if work and outputs[0].dtype not in self._warm:
                kernel += c.first_matmul_s  # the first product loads the BLAS library and autotunes
                self._warm.add(outputs[0].dtype)
            self.timeline.launch(kernel, c.launch_s)
        else:
            self.timeline.run_on_host(max(work / c.cpu_flops, c.cpu_op_s))
        device = self.kind if to_device else "cpu"
        dtype = str(outputs[0].dtype)
        if work:
            self.record("matmul", device, dtype)
        elif places and op.arithmetic:
            last = self.events[-1] if self.events else None
            if not (last and last.kind == "op" and last.device == device and last.dtype == dtype):
                self.record("op", device, dtype)  # one event per run of ops on one device and dtype

    def record(self, kind: str, device: str = "", dtype: str = "", value: float = 0.0, source: str = "") -> None:
        drained = self.timeline.host >= self.timeline.device_free
        self.events.append(Event(kind, device, self.timeline.host, self.live_bytes(), dtype, value, source,  # type: ignore[arg-type]
                                 drained, self.timeline.device_free))

    def launch(self, seconds: float) -> None:
        """Device work of ``seconds`` (torch.cuda._sleep)."""
        self.timeline.launch(seconds, self.costs.launch_s)

    # -- what checks read --------------------------------------------------------------------
    def matmul_seconds(self, n: int) -> float:
        return 2.0 * n**3 / self.costs.gpu_flops

    def cpu_matmul_seconds(self, n: int) -> float:
        return 2.0 * n**3 / self.costs.cpu_flops

    # -- the device's side of the API -----------------------------------------------------------
    def synchronize(self) -> None:
        self.timeline.synchronize()
        with modes.off(), torch.no_grad():
            for host, landed in self._pending:
                host.copy_(landed)
        self._pending.clear()
        self.record("sync", self.kind)

    def replay(self, records: list[tuple[Any, Any, Any, Any]]) -> None:
        """A captured CUDA graph's ops again, on the very tensors they read and wrote."""
        with modes.off(), torch.no_grad():
            for func, args, kwargs, out in records:
                again = self.run(func, args, kwargs)
                if func.is_view:
                    continue
                for old, new in zip(tensors(out), tensors(again), strict=False):
                    if old is not new and old.shape == new.shape:
                        old.copy_(new)

    # -- the session ----------------------------------------------------------------------------
    def _clocks(self) -> None:
        clocks = VirtualClocks(lambda: self.timeline.host, self.timeline.run_on_host,
                               lambda source, value: self.record("clock", value=value, source=source))
        replacements = clocks.replacements()
        for func, attr, value in held_as_default(replacements):
            self._stack.callback(setattr, func, attr, getattr(func, attr))
            setattr(func, attr, value)
        self._stack.enter_context(patched(replacements, self.code))

    def __enter__(self) -> StandIn:
        try:
            self._stack.enter_context(CudaRuntime(self) if self.kind == "cuda" else MpsRuntime(self))
            replacements: dict[Target, object] = {(torch, "device"): device_type_for(self.kind),
                                                  (torch, "Generator"): generator_type_for(self)}
            if self.kind == "mps" and torch.cuda.is_available():
                replacements.update(cpu_build_cuda_patches())  # torch.cuda as a Mac has it, on a CUDA machine too
            if self.kind == "cuda":  # a Mac's build refuses CUDA's types as this CPU build does
                replacements[(torch, "set_default_tensor_type")] = default_tensor_type_for(self.index0)
            self._stack.enter_context(patched(replacements, self.code))
            if self.virtual_clock:
                self._clocks()
            self._stack.enter_context(DeviceAutocast(self.kind, self.on_device).active())
            self._stack.enter_context(device_storages(self))
            saved = default_device_context()
            self._stack.enter_context(Surface(self))
            # Closed before the surface's mode is popped: see _restore_default_device.
            self._stack.callback(_restore_default_device, saved)
            self._stack.enter_context(_Dispatch(self))
            self._stack.enter_context(_every_thread(self))
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


never_compiled(_Dispatch.__torch_dispatch__, Surface.__torch_function__)


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.contexts: list[Call] = []


@contextlib.contextmanager
def _every_thread(device: StandIn) -> Iterator[None]:
    """The device in every thread the learner's code starts while it is open (a DataLoader's
    pin-memory thread, a thread pool): PyTorch keeps modes per thread, and a GPU is the whole
    process's. What PyTorch keeps per thread on a GPU too (autocast, grad mode, the default device)
    starts afresh there, as it does on one."""
    original = getattr(threading.Thread, "_bootstrap_inner", None)  # what runs every thread (CPython 3.x)
    if original is None:  # another interpreter's threading: threads see the CPU build, as before
        yield
        return

    def bootstrap(thread: threading.Thread) -> None:
        with Surface(device), _Dispatch(device):
            original(thread)

    threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]
    try:
        yield
    finally:
        threading.Thread._bootstrap_inner = original  # type: ignore[attr-defined]


def _restore_default_device(saved: Any) -> None:
    """torch.set_default_device("cuda") in the learner's code: it ends with the stand-in, and the default the
    learner had before the session (its CPU run's ``torch.set_default_device(device)``) is set again.

    Again, not put back: the learner's call in the session exited that context (took it off the mode stack), and
    torch's record of the default must only ever name the context at the bottom of the stack. Its next
    ``set_default_device`` exits the one the record names, and asserts a DeviceContext is at the bottom: a record
    put back without its context made the learner's next call, in the next session, raise "Expected a
    DeviceContext at the bottom of the mode stack", where a GPU, or a Mac, changes the default each time."""
    if default_device_context() is saved:
        return
    torch.set_default_device(None)  # exits the learner's (at the bottom, under the surface) and records none
    if saved is not None:
        torch.set_default_device(saved.device)
