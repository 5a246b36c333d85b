"""How real code calls each public name of the device API, and what a real machine answers.

The names come from torch itself (``suites.api_names``: the modules' ``__all__``); what is written
here is only how to call a name (its arguments, by parameter name or, for a few, a short use) and,
for the names whose answer on the real machine is a specific value or error, that answer.
``call_as_real_code`` returns None when the stand-in answers as the real device, else why not.
"""

from __future__ import annotations

import contextlib
import inspect
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

# What a real machine answers, where it is a specific value: a single-GPU Linux box with PyTorch's
# CUDA wheel for the CUDA stand-in, a Mac (Apple silicon, macOS 15) for the MPS stand-in.
ANSWERS: dict[str, dict[str, object]] = {
    "cuda": {
        "torch.cuda.is_available": True, "torch.cuda.device_count": 1, "torch.cuda.is_initialized": True,
        "torch.cuda.current_device": 0, "torch.cuda.has_half": True, "torch.cuda.has_magma": True,
        "torch.cuda.is_current_stream_capturing": False,
        "torch.accelerator.is_available": True, "torch.accelerator.device_count": 1,
        "torch.accelerator.current_accelerator": torch.device("cuda"), "torch.accelerator.current_device_index": 0,
        "torch.accelerator.current_device_idx": 0,
        "torch.backends.cuda.is_built": True, "torch.backends.cudnn.is_available": True,
        "torch.backends.mps.is_available": False, "torch.backends.mps.is_built": False,
    },
    "mps": {
        "torch.mps.is_available": True, "torch.mps.device_count": 1,
        "torch.accelerator.is_available": True, "torch.accelerator.device_count": 1,
        "torch.accelerator.current_accelerator": torch.device("mps"), "torch.accelerator.current_device_index": 0,
        "torch.accelerator.current_device_idx": 0,
        "torch.backends.mps.is_available": True, "torch.backends.mps.is_built": True,
        "torch.backends.cuda.is_built": False, "torch.backends.cudnn.is_available": False,
        "torch.backends.cudnn.version": None, "torch.backends.cusparselt.is_available": False,
        "torch.backends.cusparselt.version": None,
    },
}

# Names whose answer is the CPU build's, not the accelerator's: libraries of the host CPU.
HOST_LIBRARIES = {"torch.backends.mkl.is_available", "torch.backends.mkldnn.is_available",
                  "torch.backends.openmp.is_available", "torch.backends.nnpack.is_available",
                  "torch.backends.kleidiai.is_available", "torch.backends.opt_einsum.is_available"}

# Names that need more than the GPU itself on the real machine too: there they raise as here
# unless that software or hardware is installed.
NEEDS_MORE = {
    "torch.cuda.device_memory_used": "NVIDIA's management library (pynvml) and driver",
    "torch.cuda.memory_usage": "NVIDIA's management library (pynvml) and driver",
    "torch.cuda.utilization": "NVIDIA's management library (pynvml) and driver",
    "torch.cuda.temperature": "NVIDIA's management library (pynvml) and driver",
    "torch.cuda.power_draw": "NVIDIA's management library (pynvml) and driver",
    "torch.cuda.clock_rate": "NVIDIA's management library (pynvml) and driver",
    "torch.cuda.gds.gds_register_buffer": "GPUDirect Storage (cuFile) support",
    "torch.cuda.gds.gds_deregister_buffer": "GPUDirect Storage (cuFile) support",
    "torch.cuda.gds.GdsFile": "GPUDirect Storage (cuFile) support",
    "torch.cuda.CUDAPluggableAllocator": "a compiled allocator library (.so)",
    "torch.cuda.tunable.mgpu_tune_gemm_in_file": "several GPUs",
    "torch.mps.profiler.metal_capture": "MTL_CAPTURE_ENABLED=1 and Xcode's Metal capture",
}


def _tensor(kind: str) -> torch.Tensor:
    return torch.ones(4, device=kind)


def _samples(kind: str) -> dict[str, Callable[[], Any]]:
    """An argument for each parameter name the API uses, as real code passes it."""
    module: Any = torch.cuda if kind == "cuda" else torch.mps
    return {
        "device": lambda: 0,
        "peer_device": lambda: 0,
        "seed": lambda: 0,
        "new_state": module.get_rng_state,
        "new_states": torch.cuda.get_rng_state_all,
        "fraction": lambda: 0.5,
        "size": lambda: 1024,
        "res": lambda: 0,
        "code": lambda: 0,
        "stream": torch.accelerator.current_stream,
        "data_ptr": lambda: 0,
        "debug_mode": lambda: 0,
        "msg": lambda: "step",
        "duration": lambda: 30,
        "iterations": lambda: 100,
        "filename": lambda: str(Path(tempfile.gettempdir()) / "tunableop_results.csv"),
        "buffer_size": lambda: 0,
        "enable": lambda: False,
        "obj": lambda: _tensor(kind),
        "inputs": lambda: [_tensor(kind)],
        "outputs": lambda: [_tensor(kind)],
        "s": lambda: _tensor(kind).untyped_storage(),
        "bwd": lambda: (lambda ctx, g: g),
        "source": lambda: "kernel void f(device float* x, uint i [[thread_position_in_grid]]) { x[i] = 1; }",
    }


def _recipes(kind: str) -> dict[str, Callable[[Any], Any]]:
    """Names used in a few lines rather than called once."""
    def event(cls: Any) -> Any:
        start, end = cls(enable_timing=True), cls(enable_timing=True)
        start.record()
        _tensor(kind) * 2  # noqa: B018
        end.record()
        end.synchronize()
        return start.elapsed_time(end), start.query()

    def stream(cls: Any) -> Any:
        s = cls()
        with torch.cuda.stream(s):
            _tensor(kind) * 2  # noqa: B018
        s.synchronize()
        return s.query()

    def context(make: Callable[[], Any]) -> Callable[[Any], Any]:
        def use(_: Any) -> Any:
            with make():
                return _tensor(kind) * 2

        return use

    def alloc_delete(_: Any) -> None:
        ptr = torch.cuda.caching_allocator_alloc(1024)
        torch.cuda.caching_allocator_delete(ptr)

    def graph(_: Any) -> Any:
        g = torch.cuda.CUDAGraph()
        x = _tensor(kind)
        with torch.cuda.graph(g):
            y = x * 2
        x.fill_(3)
        g.replay()
        torch.cuda.synchronize()
        if y.tolist() != [6.0] * 4:
            raise AssertionError(f"a replayed graph computed {y.tolist()}, a GPU computes [6.0, 6.0, 6.0, 6.0]")

    def graphed(_: Any) -> Any:
        layer = torch.nn.Linear(4, 4, device=kind)
        graphed_layer = torch.cuda.make_graphed_callables(layer, (torch.ones(2, 4, device=kind),))
        return graphed_layer(torch.ones(2, 4, device=kind))

    def scaler(cls: Any) -> Any:
        model = torch.nn.Linear(4, 1, device=kind)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        s = cls()
        loss = model(torch.ones(2, 4, device=kind)).sum()
        s.scale(loss).backward()
        s.step(optimizer)
        s.update()
        return s.get_scale()

    def autocast(cls: Any) -> Any:
        with cls(dtype=torch.float16):
            out = torch.ones(2, 2, device=kind) @ torch.ones(2, 2, device=kind)
        if out.dtype != torch.float16:
            raise AssertionError(f"autocast ran a matmul in {out.dtype}")

    def custom_fwd(deco: Any) -> Any:
        return deco(lambda ctx, x: x)

    def tune_file(f: Any) -> Any:
        path = Path(tempfile.mkdtemp()) / "untuned.csv"
        path.write_text("", encoding="utf-8")
        return f(str(path))

    recipes: dict[str, Callable[[Any], Any]] = {
        "torch.cuda.Event": event, "torch.cuda.Stream": stream, "torch.mps.Event": event,
        "torch.cuda.ExternalStream": lambda cls: cls(stream_ptr=0x1234).query(),
        "torch.cuda.StreamContext": lambda cls: context(lambda: cls(torch.cuda.Stream()))(None),
        "torch.cuda.stream": lambda f: context(lambda: f(torch.cuda.Stream()))(None),
        "torch.cuda.device": lambda cls: context(lambda: cls(0))(None),
        "torch.cuda.device_of": lambda cls: context(lambda: cls(_tensor(kind)))(None),
        "torch.accelerator.device_index": lambda cls: context(lambda: cls(0))(None),
        "torch.cuda.caching_allocator_alloc": alloc_delete, "torch.cuda.caching_allocator_delete": alloc_delete,
        "torch.cuda.caching_allocator_disabled": lambda f: context(f)(None),
        "torch.cuda.CUDAGraph": graph, "torch.cuda.graph": graph, "torch.cuda.graph_pool_handle": lambda f: f(),
        "torch.cuda.make_graphed_callables": graphed,
        "torch.cuda.amp.GradScaler": scaler, "torch.cuda.amp.autocast": autocast,
        "torch.cuda.amp.custom_fwd": custom_fwd,
        "torch.cuda.amp.custom_bwd": lambda deco: deco(lambda ctx, g: g),
        "torch.cuda.nvtx.range": lambda f: context(lambda: f("step"))(None),
        "torch.cuda.nvtx.range_end": lambda f: f(torch.cuda.nvtx.range_start("step")),
        "torch.cuda.profiler.profile": lambda f: context(f)(None),
        "torch.mps.profiler.profile": lambda f: context(f)(None),
        "torch.cuda.MemPool": lambda cls: cls(),
        "torch.cuda.use_mem_pool": lambda f: context(lambda: f(torch.cuda.MemPool()))(None),
        "torch.cuda.change_current_allocator": lambda f: f(torch.cuda.memory._get_current_allocator()),
        "torch.cuda.GreenContext": lambda cls: cls.create(num_sms=1, device_id=0),
        "torch.cuda.cudaStatus": lambda cls: (cls.SUCCESS, cls.ERROR_NOT_READY),
        "torch.cuda.DeferredCudaCallError": lambda cls: cls("x"),
        "torch.cuda.streams.annotations": lambda value: value,
        "torch.cuda.default_generators": lambda gens: [g.initial_seed() for g in gens],
        "torch.cuda.tunable.tune_gemm_in_file": tune_file,
        "torch.accelerator.Graph": lambda cls: cls(),
        "torch.accelerator.set_stream": lambda f: f(torch.accelerator.current_stream()),
    }
    for dtype in ("BFloat16", "Bool", "Byte", "Char", "ComplexDouble", "ComplexFloat", "Double", "Float", "Half",
                  "Int", "Long", "Short"):
        recipes[f"torch.cuda.{dtype}Storage"] = lambda cls: cls(4)
        recipes[f"torch.cuda.{dtype}Tensor"] = lambda cls: cls(4)
    return recipes


def _call(func: Callable[..., Any], kind: str) -> Any:
    samples = _samples(kind)
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return func()
    args = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
            continue
        if p.name not in samples:
            raise LookupError(f"no sample for parameter {p.name!r}")
        args.append(samples[p.name]())
    return func(*args)


def call_as_real_code(kind: str, name: str, obj: Any) -> str | None:
    """None when ``name`` answers on the stand-in as on the real machine; else what differs."""
    if name in HOST_LIBRARIES:
        return None  # the host CPU's libraries: the same answer on the real machine's CPU build
    recipe = _recipes(kind).get(name)
    try:
        with contextlib.ExitStack():
            if recipe is not None:
                answer = recipe(obj)
            elif not callable(obj):
                answer = obj
            else:
                answer = _call(obj, kind)
    except Exception as exc:  # noqa: BLE001
        if name in NEEDS_MORE:
            return None  # the real machine raises too, without that
        return f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    expected = ANSWERS[kind].get(name, _ANY)
    if expected is not _ANY and answer != expected:
        return f"answered {answer!r}; the real machine answers {expected!r}"
    return None


_ANY = object()
