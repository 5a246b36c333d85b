"""The stand-in measured against references nobody on this project wrote.

Each suite runs a reference from PyTorch itself on the CPU and on a stand-in accelerator, and
returns a ``Figure``: how many cases behave as PyTorch defines them on the real device, and every
miss with its reason. ``benchmarks/standin_conformance.py`` prints them all (the full sweep);
``tests/conformance/`` runs samples of each in CI and fails on any miss that is not declared.

- ops: ``torch.testing._internal.common_methods_invocations.op_db`` — every op with float32
  samples on CPU and CUDA, inputs moved with ``.to(device)``: outputs on the device, the CPU's
  values, the same errors.
- modules: ``common_modules.module_db`` — each module built with ``device=`` (the lesson's "create it
  on the device"), forward and backward on device inputs: parameters, outputs and gradients on the
  device, the CPU's values.
- cost: real-size products, convolutions and attention: the device time charged is at least the
  FLOP counter's work (``torch.utils.flop_counter``) at the stand-in's FLOP rate.
- autocast: ``autocast_test_lists.AutocastTestLists`` (the lists test_cuda.py checks CUDA autocast
  with): each op's output dtype under ``torch.autocast("cuda", torch.float16)``.
- api: every public name of torch.cuda (with memory, random, streams, graphs, nvtx ...), torch.mps
  and torch.accelerator, enumerated from the modules' ``__all__``, and torch.backends.*'s
  availability functions: each works as on a real single-GPU machine (or a Mac), or is declared
  with what the real device does.
- clocks: every clock the standard library offers (enumerated from the modules: any function
  whose reading moves with real time) follows the virtual timeline, and real time does not leak.

The stand-in under test is ``grader.emulated`` when it exists, else the stand-in before it
(``grader.learner.standin.StandIn``): the same suites measured both.
"""

from __future__ import annotations

import contextlib
import datetime
import inspect
import math
import os
import resource
import time
import timeit
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

# The machine's real clock, taken before any stand-in patches the time module (and held where a
# stand-in's rebinding of the caller's module-level names does not reach).
_REAL = types.SimpleNamespace(monotonic=time.monotonic, process_time=time.process_time)


@dataclass
class Figure:
    """x of y cases behave as PyTorch defines them; each miss with its reason."""

    name: str
    passed: int = 0
    total: int = 0
    misses: dict[str, str] = field(default_factory=dict)
    unjudged: dict[str, str] = field(default_factory=dict)  # no reference to judge against (not counted)

    def hit(self) -> None:
        self.passed += 1
        self.total += 1

    def miss(self, case: str, reason: str) -> None:
        self.total += 1
        self.misses[case] = reason[:300]

    @property
    def percent(self) -> float:
        return 100.0 * self.passed / self.total if self.total else 100.0

    def line(self) -> str:
        return f"{self.name}: {self.passed}/{self.total} ({self.percent:.1f}%)"


# -- the stand-in under test --------------------------------------------------------------------

def _implementation() -> Callable[..., Any]:
    try:
        from grader import emulated  # type: ignore[attr-defined]
    except ImportError:
        emulated = None
    if emulated is not None:
        return emulated  # type: ignore[no-any-return]
    from grader.learner.standin import StandIn

    def before(kind: str, *, virtual_clock: bool = False, costs: Any = None) -> Any:
        return StandIn(kind, costs=costs, virtual_clock=virtual_clock)  # type: ignore[arg-type]

    return before


def which() -> str:
    """Which stand-in the suites measure."""
    try:
        from grader import emulated  # type: ignore[attr-defined]  # noqa: F401
    except ImportError:
        return "before: grader.learner.standin.StandIn"
    return "grader.emulated"


def standin(kind: str = "cuda", *, virtual_clock: bool = False, costs: Any = None) -> Any:
    return _implementation()(kind, virtual_clock=virtual_clock, costs=costs)


def _cost_model(**changes: float) -> Any:
    if which() == "grader.emulated":
        from grader.reference.device import CostModel
    else:
        from grader.learner.standin import CostModel  # type: ignore[no-redef]
    return CostModel(**changes)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]


def _sampled(items: list[Any], every: int) -> list[Any]:
    return items[::every] if every > 1 else items


# -- ops --------------------------------------------------------------------------------------

def _op_cases() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return [op for op in op_db
            if torch.float32 in op.supported_dtypes("cpu") and torch.float32 in op.supported_dtypes("cuda")]


def _samples(op: Any, limit: int) -> list[Any]:
    torch.manual_seed(0)
    samples = []
    with contextlib.suppress(Exception):
        for sample in op.sample_inputs("cpu", torch.float32, requires_grad=False):
            samples.append(sample)
            if len(samples) >= limit:
                break
    return samples


def _call(op: Any, sample: Any, device: str | None) -> Any:
    def move(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.clone() if device is None else x.to(device)
        if device is not None and (x == "cpu" or x == torch.device("cpu")) and not isinstance(x, bool):
            return device  # a device argument, made for the CPU: op_db makes it the device under test
        return x

    inp = tree_map(move, sample.input)
    args = tree_map(move, sample.args)
    kwargs = tree_map(move, dict(sample.kwargs))
    if device is not None and "device" in kwargs:  # the sample was made for the CPU: for the device, as op_db would
        kwargs["device"] = device
    return op(inp, *args, **kwargs)


UNINITIALIZED = {torch.ops.aten.empty, torch.ops.aten.empty_like, torch.ops.aten.empty_strided,
                 torch.ops.aten.empty_permuted, torch.ops.aten.new_empty, torch.ops.aten.new_empty_strided}


@dataclass
class Profile:
    """What a sample's aten ops do on the CPU (as PyTorch tags and types them)."""

    random: bool = False  # an op tagged nondeterministic_seeded: a GPU draws from its own generator
    computes: bool = False  # not only empty tensors (whose values are whatever memory held)
    float64: bool = False  # a float64 / complex128 tensor, which MPS lacks: a Mac raises a TypeError


def profile(run: Callable[[], Any]) -> Profile:
    from torch.utils._python_dispatch import TorchDispatchMode

    found = Profile()

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if torch.Tag.nondeterministic_seeded in func.tags:
                found.random = True
            copies = func is torch.ops.aten.clone.default
            if not func.is_view and func.overloadpacket not in UNINITIALIZED and not copies:
                found.computes = True
            if any(t.dtype in (torch.float64, torch.complex128) for t in tree_flatten((args, kwargs, out))[0]
                   if isinstance(t, torch.Tensor)):
                found.float64 = True
            return out

    with contextlib.suppress(Exception), Seen():
        run()
    return found


def _random(op: Any, sample: Any) -> bool:
    """Whether the sample's values cannot be the CPU's: random, or uninitialized."""
    seen = profile(lambda: _call(op, sample, None))
    return seen.random or not seen.computes


def _as_on_a_mac(kind: str, run: Callable[[], Any], raised: BaseException) -> bool:
    """The stand-in raised MPS's float64 TypeError where the CPU run uses float64: as a Mac does."""
    return kind == "mps" and isinstance(raised, TypeError) and "float64" in str(raised) and profile(run).float64


def _dense(x: torch.Tensor) -> torch.Tensor:
    with torch._C.DisableTorchFunction():
        return x.detach().to_dense() if x.layout != torch.strided else x.detach()


def _same(expected: Any, got: Any) -> str | None:
    """None when ``got`` (gathered on the device, then read as plain CPU data) equals ``expected``."""
    e_leaves, e_spec = tree_flatten(expected)
    g_leaves, g_spec = tree_flatten(got)
    if len(e_leaves) != len(g_leaves):
        return f"{len(g_leaves)} outputs, the CPU gives {len(e_leaves)}"
    for e, g in zip(e_leaves, g_leaves, strict=True):
        if isinstance(e, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return f"a {type(g).__name__} where the CPU gives a tensor"
            if e.dtype != g.dtype or e.shape != g.shape:
                return f"{g.dtype}{tuple(g.shape)} where the CPU gives {e.dtype}{tuple(e.shape)}"
            with torch._C.DisableTorchFunction():
                want, have = _dense(e), _dense(g)
                try:
                    if want.is_complex() or want.is_floating_point():
                        same = torch.allclose(want, have, equal_nan=True, rtol=1e-5, atol=1e-6)
                    else:
                        same = torch.equal(want, have)
                except (RuntimeError, NotImplementedError):
                    same = torch.equal(want.view(torch.uint8), have.view(torch.uint8))
                if not same:
                    return "values differ from the CPU's"
        elif e != g and not (isinstance(e, float) and math.isnan(e) and math.isnan(g)):
            return f"{g!r} where the CPU gives {e!r}"
    return None


def op_figure(every: int = 1, samples_per_op: int = 3, kind: str = "cuda") -> Figure:
    """Placement, values and errors of op_db's ops on the stand-in."""
    figure = Figure(f"ops (op_db, {kind})")
    for op in _sampled(_op_cases(), every):
        case = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}"
        reason = _op_case(op, samples_per_op, kind)
        if reason is None:
            figure.hit()
        else:
            figure.miss(case, reason)
    return figure


def _op_case(op: Any, samples_per_op: int, kind: str) -> str | None:
    for sample in _samples(op, samples_per_op):
        torch.manual_seed(0)
        try:
            expected: Any = _call(op, sample, None)
            cpu_error: BaseException | None = None
        except Exception as exc:  # noqa: BLE001
            expected, cpu_error = None, exc
        random = cpu_error is None and _random(op, sample)
        devices: list[str] = []
        torch.manual_seed(0)
        try:
            with warnings.catch_warnings(), standin(kind):
                warnings.simplefilter("ignore")
                got = _call(op, sample, kind)
                devices = [str(t.device.type) for t in tree_flatten(got)[0] if isinstance(t, torch.Tensor)]
        except Exception as exc:  # noqa: BLE001
            if cpu_error is not None and type(exc) is type(cpu_error):
                continue
            if _as_on_a_mac(kind, lambda sample=sample: _call(op, sample, None), exc):
                continue
            return f"raised {_error(exc)}" + (f" (the CPU raised {_error(cpu_error)})" if cpu_error else "")
        if cpu_error is not None:
            return f"returned where the CPU raised {_error(cpu_error)}"
        if any(d != kind for d in devices):
            return f"an output on {sorted(set(devices) - {kind})}, not {kind}"
        if not random:
            differs = _same(expected, got)
            if differs:
                return differs
    return None


# -- modules ----------------------------------------------------------------------------------

def _module_cases() -> list[Any]:
    from torch.testing._internal.common_modules import module_db

    return [m for m in module_db if torch.float32 in m.supported_dtypes("cpu")
            and torch.float32 in m.supported_dtypes("cuda") and not m.is_lazy]


def _accepts_device(cls: type) -> bool:
    try:
        return "device" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def _forward(module: torch.nn.Module, forward_input: Any, move: Callable[[Any], Any] | None = None) -> Any:
    args, kwargs = forward_input.args, forward_input.kwargs
    if move is not None:
        args, kwargs = tree_map(move, (args, kwargs))
    return module(*args, **kwargs)


def module_figure(every: int = 1, kind: str = "cuda") -> Figure:
    """module_db's modules built on the stand-in with device=..., forward and backward there."""
    figure = Figure(f"modules (module_db, built with device=\"{kind}\")")
    for info in _sampled(_module_cases(), every):
        reason = _module_case(info, kind)
        if reason is None:
            figure.hit()
        else:
            figure.miss(info.name, reason)
    return figure


def _plain(x: Any) -> Any:
    """A stand-in's tensor as the CPU tensor it really is (read outside the stand-in)."""
    return x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x


def _module_on_cpu(info: Any) -> BaseException | None:
    """What the first sample raises on the CPU (None: it runs)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True,
                                              training=True)[:1]
            if samples and samples[0].forward_input is not None:
                sample = samples[0]
                module = info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
                out = _forward(module, sample.forward_input)
                loss = sum(t.float().sum() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)
                           and t.requires_grad)
                if isinstance(loss, torch.Tensor):
                    loss.backward()
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def _module_case(info: Any, kind: str) -> str | None:
    factory = {"device": kind} if _accepts_device(info.module_cls) else {}
    cpu_error = _module_on_cpu(info)
    try:
        with warnings.catch_warnings(), standin(kind):
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            # As test_modules.py does: the sample's tensors made on the device under test.
            samples = info.module_inputs_func(info, device=kind, dtype=torch.float32, requires_grad=True,
                                              training=True)[:1]
            if not samples or samples[0].forward_input is None:
                return None
            sample = samples[0]
            module = info.module_cls(*sample.constructor_input.args, **{**sample.constructor_input.kwargs, **factory})
            if not factory:
                module = module.to(kind)
            on = [p.device.type for p in module.parameters()] + [b.device.type for b in module.buffers()]
            out = _forward(module, sample.forward_input)
            outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            out_devices = [t.device.type for t in outs]
            loss = sum(t.float().sum() for t in outs if t.requires_grad)
            if isinstance(loss, torch.Tensor):
                loss.backward()
            grad_devices = [p.grad.device.type for p in module.parameters() if p.grad is not None]
    except Exception as exc:  # noqa: BLE001
        if cpu_error is not None and type(exc) is type(cpu_error):
            return None  # the sample is an error case: it raises on every device
        if _as_on_a_mac(kind, lambda: _module_on_cpu(info), exc):
            return None
        return f"raised {_error(exc)}"
    if cpu_error is not None:
        return f"ran where the CPU raised {_error(cpu_error)}"
    wrong = [d for d in on + out_devices + grad_devices if d != kind]
    if wrong:
        what = "a parameter or buffer" if any(d != kind for d in on) else (
            "an output" if any(d != kind for d in out_devices) else "a gradient")
        return f"{what} on {wrong[0]}, not {kind}"
    if info.train_and_eval_differ or "Dropout" in info.name or "RReLU" in info.name or "Fractional" in info.name:
        return None  # random in training mode: placement is what counts
    # The CPU's values from the same weights and inputs.
    try:
        state = {k: _plain(v) for k, v in module.state_dict().items()}
        args, kwargs = tree_map(_plain, (sample.constructor_input.args, sample.constructor_input.kwargs))
        reference = info.module_cls(*args, **kwargs)
        reference.load_state_dict(state)
        expected = _forward(reference, sample.forward_input, _plain)
    except Exception:  # noqa: BLE001 - a module the CPU cannot rebuild from its state: placement is what counts
        return None
    return _same(expected, tree_map(_plain, out))


# -- cost -------------------------------------------------------------------------------------

def _cost_cases() -> dict[str, Callable[[str], Callable[[], Any]]]:
    """Real-size device work, each written the ways real code writes it."""
    def mats(dev: str, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=dev)

    def case_mm(dev: str) -> Callable[[], Any]:
        a, b = mats(dev, 1024, 1024), mats(dev, 1024, 1024)
        return lambda: torch.mm(a, b)

    def case_matmul_op(dev: str) -> Callable[[], Any]:
        a, b = mats(dev, 1024, 1024), mats(dev, 1024, 1024)
        return lambda: a @ b

    def case_matmul_3d(dev: str) -> Callable[[], Any]:
        a, b = mats(dev, 8, 256, 512), mats(dev, 512, 256)
        return lambda: torch.matmul(a, b)

    def case_bmm(dev: str) -> Callable[[], Any]:
        a, b = mats(dev, 16, 256, 256), mats(dev, 16, 256, 256)
        return lambda: torch.bmm(a, b)

    def case_baddbmm(dev: str) -> Callable[[], Any]:
        c, a, b = mats(dev, 16, 256, 256), mats(dev, 16, 256, 256), mats(dev, 16, 256, 256)
        return lambda: torch.baddbmm(c, a, b)

    def case_addmm(dev: str) -> Callable[[], Any]:
        c, a, b = mats(dev, 1024), mats(dev, 512, 1024), mats(dev, 1024, 1024)
        return lambda: torch.addmm(c, a, b)

    def case_linear(dev: str) -> Callable[[], Any]:
        layer = torch.nn.Linear(1024, 1024, device=dev)
        x = mats(dev, 512, 1024)
        return lambda: layer(x)

    def case_einsum(dev: str) -> Callable[[], Any]:
        a, b = mats(dev, 8, 128, 256), mats(dev, 8, 256, 128)
        return lambda: torch.einsum("bij,bjk->bik", a, b)

    def case_tensordot(dev: str) -> Callable[[], Any]:
        a, b = mats(dev, 64, 64, 64), mats(dev, 64, 64, 64)
        return lambda: torch.tensordot(a, b, dims=2)

    def case_mv(dev: str) -> Callable[[], Any]:
        a, v = mats(dev, 2048, 2048), mats(dev, 2048)
        return lambda: torch.mv(a, v)

    def case_conv1d(dev: str) -> Callable[[], Any]:
        conv = torch.nn.Conv1d(64, 64, 5, device=dev)
        x = mats(dev, 8, 64, 512)
        return lambda: conv(x)

    def case_conv2d(dev: str) -> Callable[[], Any]:
        conv = torch.nn.Conv2d(32, 64, 3, padding=1, device=dev)
        x = mats(dev, 8, 32, 64, 64)
        return lambda: conv(x)

    def case_conv2d_functional(dev: str) -> Callable[[], Any]:
        x, w = mats(dev, 8, 32, 64, 64), mats(dev, 64, 32, 3, 3)
        return lambda: torch.nn.functional.conv2d(x, w, padding=1)

    def case_conv_transpose2d(dev: str) -> Callable[[], Any]:
        conv = torch.nn.ConvTranspose2d(64, 32, 3, device=dev)
        x = mats(dev, 8, 64, 32, 32)
        return lambda: conv(x)

    def case_conv3d(dev: str) -> Callable[[], Any]:
        conv = torch.nn.Conv3d(8, 16, 3, device=dev)
        x = mats(dev, 4, 8, 16, 16, 16)
        return lambda: conv(x)

    def case_sdpa(dev: str) -> Callable[[], Any]:
        q, k, v = mats(dev, 4, 8, 256, 64), mats(dev, 4, 8, 256, 64), mats(dev, 4, 8, 256, 64)
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)

    def case_attention_by_hand(dev: str) -> Callable[[], Any]:
        q, k, v = mats(dev, 4, 8, 256, 64), mats(dev, 4, 8, 256, 64), mats(dev, 4, 8, 256, 64)
        return lambda: torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v

    def case_multihead(dev: str) -> Callable[[], Any]:
        mha = torch.nn.MultiheadAttention(256, 8, batch_first=True, device=dev)
        x = mats(dev, 4, 128, 256)
        return lambda: mha(x, x, x, need_weights=False)

    return {name.removeprefix("case_"): fn for name, fn in locals().items() if name.startswith("case_")}


def cost_figure(kind: str = "cuda") -> Figure:
    """Device time charged for real-size products, convolutions and attention >= their FLOPs at
    the stand-in's FLOP rate (timed with the device's own events, as a learner would)."""
    figure = Figure(f"cost ({kind}: device time >= the FLOP counter's work, else the bytes it moves)")
    costs = _cost_model()
    for name, make in _cost_cases().items():
        flops, nbytes = _reference_work(make, kind)
        expected = max(flops / costs.gpu_flops, nbytes / costs.elementwise_bytes_per_s)
        try:
            with warnings.catch_warnings(), standin(kind, virtual_clock=True), torch.no_grad():
                warnings.simplefilter("ignore")
                events = torch.cuda if kind == "cuda" else torch.mps
                work = make(kind)
                work()  # warm-up: the first product's library load is not its cost
                events.synchronize()
                start, end = events.Event(enable_timing=True), events.Event(enable_timing=True)
                start.record()
                work()
                end.record()
                end.synchronize()
                charged = start.elapsed_time(end) / 1000.0
        except Exception as exc:  # noqa: BLE001
            figure.miss(name, f"raised {_error(exc)}")
            continue
        if charged >= 0.99 * expected:
            figure.hit()
        else:
            what = f"its {flops / 1e9:.2f} GFLOP" if flops else f"the {nbytes / 2**20:.1f} MiB it moves"
            figure.miss(name, f"charged {charged * 1e6:.0f} µs; {what} take {expected * 1e6:.0f} µs on the stand-in")
    return figure


def _reference_work(make: Callable[[str], Callable[[], Any]], kind: str) -> tuple[int, int]:
    """The FLOPs PyTorch's FLOP counter counts for the work on ``kind`` itself (fake tensors on
    ``kind``: attention takes the device's kernels, not this CPU build's), and the bytes its ops
    read and write."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class Bytes(TorchDispatchMode):
        moved = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if not func.is_view:
                Bytes.moved += sum(t.numel() * t.element_size() for t in tree_flatten((args, kwargs, out))[0]
                                   if isinstance(t, torch.Tensor))
            return out

    torch.manual_seed(0)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            with fake_device(kind):
                work = make(kind)
                counter = FlopCounterMode(display=False)
                with counter:
                    work()
                flops = counter.get_total_flops()
        except Exception:  # noqa: BLE001 - fake tensors cannot run it: count on the CPU
            work = make("cpu")
            counter = FlopCounterMode(display=False)
            with counter:
                work()
            flops = counter.get_total_flops()
        work = make("cpu")
        with Bytes():
            work()
    return int(flops), Bytes.moved


# -- autocast ---------------------------------------------------------------------------------

def _autocast_lists(dev: str) -> list[tuple[str, str, Any, tuple[Any, ...], dict[str, Any], Any]]:
    """(list, op, module, args, kwargs, expected dtype or 'raises') from AutocastTestLists, the way
    test/test_cuda.py reads them."""
    from torch.testing._internal.autocast_test_lists import AutocastTestLists

    lists = AutocastTestLists(torch.device(dev))
    cases: list[tuple[str, str, Any, tuple[Any, ...], dict[str, Any], Any]] = []

    def add(list_name: str, entries: list[Any], module: Any, expected: Any) -> None:
        for entry in entries:
            op, args = entry[0], entry[1]
            kwargs = entry[2] if len(entry) > 2 and isinstance(entry[2], dict) else {}
            if op == "einsum":  # ("einsum", "bkhd,bqhd->bqkh", (a, b))
                args, kwargs = (entry[1], *entry[2]), {}
            if len(entry) > 2 and entry[2] is True:  # skipped on ROCm only
                pass
            cases.append((list_name, op, module, tuple(args), kwargs, expected))

    add("torch_fp16", lists.torch_fp16, torch, torch.float16)
    add("torch_fp32", lists.torch_fp32, torch, torch.float32)
    add("torch_need_autocast_promote", lists.torch_need_autocast_promote, torch, torch.float32)
    add("nn_fp16", lists.nn_fp16, torch._C._nn, torch.float16)
    add("nn_fp32", lists.nn_fp32, torch._C._nn, torch.float32)
    add("linalg_fp16", lists.linalg_fp16, torch._C._linalg, torch.float16)
    add("methods_fp16", lists.methods_fp16, None, torch.float16)
    add("methods_fp32", lists.methods_fp32, None, torch.float32)
    for op, args, module in lists.banned:
        cases.append(("banned", op, module, tuple(args), {}, "raises"))
    return cases


def _run_listed(op: str, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if module is not None and hasattr(module, op):
        return getattr(module, op)(*args, **kwargs)
    return getattr(args[0], op)(*args[1:], **kwargs)


def _first_tensor(out: Any) -> torch.Tensor | None:
    return next((t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)), None)


@contextlib.contextmanager
def fake_device(kind: str) -> Iterator[Callable[[Any], Any]]:
    """PyTorch's own kernels for ``kind`` on this machine: FakeTensorMode with tensors that claim to
    live on ``kind`` (the autocast kernels of ``kind`` see them; nothing is computed). Yields a
    function turning real CPU arguments into such fakes."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        def fake(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                with torch._C.DisableTorchFunction():
                    return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device=kind)
            return x

        yield lambda args: tree_map(fake, args)
        del mode


def _autocast_dtype_on(kind: str, op: str, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The output dtype (or 'raises') of ``op`` under ``kind``'s own autocast kernels, float16;
    None when fake tensors cannot run the op at all (no reference)."""
    def run(autocast: bool) -> Any:
        with warnings.catch_warnings(), fake_device(kind) as fake, torch.no_grad():
            warnings.simplefilter("ignore")
            fargs, fkwargs = fake((args, kwargs) if autocast else tree_map(
                lambda x: x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x, (args, kwargs)))
            before = torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)
            torch.set_autocast_enabled(kind, autocast)
            torch.set_autocast_dtype(kind, torch.float16)
            try:
                return _run_listed(op, module, fargs, fkwargs)
            finally:
                torch.set_autocast_enabled(kind, before[0])
                torch.set_autocast_dtype(kind, before[1])

    import logging
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    try:
        out = run(True)
    except Exception:  # noqa: BLE001
        try:
            run(False)
        except Exception:  # noqa: BLE001
            return None  # fake tensors cannot run it: no reference
        return "raises"
    first = _first_tensor(out)
    return first.dtype if first is not None else "no tensor"


def autocast_figure(kind: str = "cuda") -> Figure:
    """Output dtypes under torch.autocast(kind, float16), each compared with what ``kind``'s own
    autocast kernels give (PyTorch's AutocastCUDA / AutocastMPS kernels run on fake tensors that claim
    to live on ``kind``), for every op of the lists test_cuda.py checks CUDA autocast with."""
    figure = Figure(f"autocast ({kind} float16: the ops of AutocastTestLists, against {kind}'s own kernels)")
    seen: dict[str, int] = {}
    torch.manual_seed(0)
    cases = _autocast_lists("cpu")
    expected = [_autocast_dtype_on(kind, op, module, args, kwargs) for _, op, module, args, kwargs, _ in cases]
    for i, (_, op, module, args, kwargs, listed) in enumerate(cases):
        if expected[i] is None:  # no fake-tensor reference: the list's own expectation (what test_cuda.py
            # asserts), unless the arguments are invalid in any dtype (then every device raises)
            if kind != "cuda":
                continue  # the lists are CUDA's: no reference for another device
            if op.startswith("cudnn"):
                expected[i] = listed if kind == "cuda" else "raises"  # cuDNN exists on CUDA only
                continue
            as_fp32 = tree_map(lambda x: x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x,
                               (args, kwargs))
            try:
                _run_listed(op, module, *as_fp32)
                expected[i] = listed
            except Exception:  # noqa: BLE001
                expected[i] = "raises"
    with warnings.catch_warnings(), standin(kind):
        warnings.simplefilter("ignore")
        for (list_name, op, module, args, kwargs, _), want in zip(cases, expected, strict=True):
            seen[f"{list_name}.{op}"] = seen.get(f"{list_name}.{op}", 0) + 1
            case = f"{list_name}.{op}" + (f"#{seen[f'{list_name}.{op}']}" if seen[f"{list_name}.{op}"] > 1 else "")
            if want is None:
                figure.unjudged[case] = f"{kind}'s kernels do not run it on fake tensors here: no reference"
                continue
            moved = tree_map(lambda x: x.to(kind) if isinstance(x, torch.Tensor) else x, (args, kwargs))
            try:
                with torch.autocast(kind, dtype=torch.float16):
                    out = _run_listed(op, module, *moved)
            except Exception as exc:  # noqa: BLE001
                if want == "raises":
                    figure.hit()
                else:
                    figure.miss(case, f"raised {_error(exc)}; {kind} runs it in {want}")
                continue
            if want == "raises":
                figure.miss(case, f"ran; {kind}'s autocast raises")
                continue
            first = _first_tensor(out)
            got = first.dtype if first is not None else "no tensor"
            if got == want:
                figure.hit()
            else:
                figure.miss(case, f"ran in {got}; {kind}'s autocast runs it in {want}")
    return figure


# -- the device API ---------------------------------------------------------------------------

def api_names(kind: str) -> dict[str, Any]:
    """Every public name of the device's API, from the modules' own ``__all__`` (one entry per object)."""
    found: dict[str, Any] = {}
    seen: set[int] = set()

    def add(prefix: str, module: types.ModuleType) -> None:
        for name in getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]:
            obj = getattr(module, name, None)
            if obj is None or isinstance(obj, types.ModuleType) or id(obj) in seen:
                continue
            seen.add(id(obj))
            found[f"{prefix}.{name}"] = obj

    if kind == "cuda":
        add("torch.cuda", torch.cuda)
        for sub in ("memory", "random", "streams", "graphs", "nvtx", "profiler", "tunable", "gds", "green_contexts",
                    "nccl", "amp"):
            module = getattr(torch.cuda, sub, None)
            if isinstance(module, types.ModuleType):
                add(f"torch.cuda.{sub}", module)
    else:
        add("torch.mps", torch.mps)
        for sub in ("event", "profiler"):
            module = getattr(torch.mps, sub, None)
            if isinstance(module, types.ModuleType):
                add(f"torch.mps.{sub}", module)
    add("torch.accelerator", torch.accelerator)
    import importlib
    import pkgutil

    backends = importlib.import_module("torch.backends")
    for info in pkgutil.iter_modules(backends.__path__):
        if info.name.startswith("_"):
            continue
        with contextlib.suppress(Exception):
            module = importlib.import_module(f"torch.backends.{info.name}")
            for name in ("is_available", "is_built", "version"):
                obj = getattr(module, name, None)
                if callable(obj) and id(obj) not in seen:
                    seen.add(id(obj))
                    found[f"torch.backends.{info.name}.{name}"] = obj
    return found


def api_figure(kind: str = "cuda") -> Figure:
    """Each public name called as real code calls it: it works, or does what the real device does."""
    from tests.conformance.census import call_as_real_code

    figure = Figure(f"api ({'torch.cuda' if kind == 'cuda' else 'torch.mps'}, torch.accelerator, torch.backends "
                    f"on a {kind} stand-in)")
    with warnings.catch_warnings(), standin(kind):
        warnings.simplefilter("ignore")
        for name, obj in api_names(kind).items():  # read inside: a name's value is the device's
            reason = call_as_real_code(kind, name, obj)
            if reason is None:
                figure.hit()
            else:
                figure.miss(name, reason)
    return figure


# -- clocks -----------------------------------------------------------------------------------

def _struct_seconds(value: time.struct_time) -> float:
    return float(time.mktime(value)) if value.tm_zone != "UTC" else float(__import__("calendar").timegm(value))


def clock_readers() -> dict[str, Callable[[], float]]:
    """Every way the standard library reads a clock, as seconds: enumerated from the modules (each
    function of ``time`` callable without arguments, ``clock_gettime`` of every ``CLOCK_*`` id, the
    ``datetime`` classes' constructors of "now", ``os.times``, ``resource.getrusage``, ``timeit``),
    then kept if its reading moves with real time (see ``clocks_that_move``)."""
    readers: dict[str, Callable[[], float]] = {}

    def as_seconds(value: Any) -> float | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, time.struct_time):
            return _struct_seconds(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return time.mktime(time.strptime(value))
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, datetime.date):
            return float(value.toordinal() * 86400)
        return None

    for name in dir(time):
        func = getattr(time, name)
        if name.startswith("_") or not callable(func) or name in ("sleep",):
            continue
        if name in ("clock_gettime", "clock_gettime_ns"):
            for clock in (c for c in dir(time) if c.startswith("CLOCK_")):
                scale = 1e-9 if name.endswith("_ns") else 1.0
                readers[f"time.{name}(time.{clock})"] = (
                    lambda f=name, c=clock, s=scale: float(getattr(time, f)(getattr(time, c))) * s)
            continue
        with contextlib.suppress(Exception):
            if as_seconds(func()) is not None:
                scale = 1e-9 if name.endswith("_ns") else 1.0
                readers[f"time.{name}()"] = lambda n=name, s=scale: as_seconds(getattr(time, n)()) * s  # type: ignore[operator]
    for cls in (datetime.datetime, datetime.date):
        for name in ("now", "utcnow", "today"):
            if hasattr(cls, name):
                readers[f"datetime.{cls.__name__}.{name}()"] = (
                    lambda c=cls.__name__, n=name: as_seconds(getattr(getattr(datetime, c), n)()))  # type: ignore[misc]
    readers["datetime.datetime.now(timezone.utc)"] = lambda: datetime.datetime.now(datetime.timezone.utc).timestamp()
    readers["os.times().elapsed"] = lambda: os.times().elapsed
    readers["os.times() user+system"] = lambda: os.times().user + os.times().system
    for who in ("RUSAGE_SELF", "RUSAGE_THREAD"):
        if hasattr(resource, who):
            readers[f"resource.getrusage({who}) user+system"] = lambda w=who: _cpu_seconds(
                resource.getrusage(getattr(resource, w)))
    # Looked up at each read (a stand-in replaces the module's attribute), not bound here.
    readers["timeit.default_timer()"] = lambda: timeit.default_timer()  # noqa: PLW0108
    return readers


def _cpu_seconds(usage: Any) -> float:
    return float(usage.ru_utime + usage.ru_stime)


def _busy(seconds: float) -> None:
    """``seconds`` of real time and of this process's CPU time passing (however loaded the machine:
    on a busy one the CPU time takes longer), so that wall clocks and CPU-time clocks both move."""
    wall, cpu = _REAL.monotonic() + seconds, _REAL.process_time() + seconds
    x = 0
    while _REAL.monotonic() < wall or _REAL.process_time() < cpu:
        x += 1


def _read_all(readers: dict[str, Callable[[], float]]) -> dict[str, float | BaseException]:
    found: dict[str, float | BaseException] = {}
    for name, read in readers.items():
        try:
            found[name] = read()
        except Exception as exc:  # noqa: BLE001
            found[name] = exc
    return found


def _moved(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float | BaseException]:
    return {name: after[name] if isinstance(after[name], BaseException) else (
        before[name] if isinstance(before[name], BaseException) else after[name] - before[name]) for name in before}


def clocks_that_move() -> dict[str, Callable[[], float]]:
    """The readers whose reading moves with 1.2 s of real, busy time (outside any stand-in): the clocks."""
    readers = clock_readers()
    start = _read_all(readers)
    _busy(1.2)
    moved = _moved(start, _read_all(readers))
    return {name: readers[name] for name, delta in moved.items() if isinstance(delta, float) and delta > 0.3}


def _stopwatches() -> dict[str, Callable[[Callable[[], Any]], float]]:
    """The standard library's (and torch's) ready-made stopwatches: seconds one run of ``work`` took."""
    def timeit_timer(work: Callable[[], Any]) -> float:
        return float(timeit.Timer(work).timeit(number=1))

    def timeit_function(work: Callable[[], Any]) -> float:
        return float(timeit.timeit(work, number=1))

    def benchmark_timer(work: Callable[[], Any]) -> float:
        from torch.utils import benchmark

        return float(benchmark.Timer(stmt="work()", globals={"work": work}).timeit(1).mean)

    return {"timeit.Timer(...).timeit()": timeit_timer, "timeit.timeit(...)": timeit_function,
            "torch.utils.benchmark.Timer(...).timeit()": benchmark_timer}


def clock_figure(kind: str = "cuda") -> Figure:
    """Every clock follows the virtual timeline: ~2 s of virtual device work (synchronized) moves it
    by ~2 s, and 1.2 s of real, busy time does not move it. All clocks are read around the same work."""
    readers = clocks_that_move()
    figure = Figure(f"clocks (the standard library's, on a {kind} stand-in with virtual_clock=True)")
    slow = _cost_model(gpu_flops=1e8)  # a 256x256 product: 0.34 s of virtual device time
    a = torch.randn(256, 256)

    def device_work(dev: str, seconds: float) -> None:
        x = a.to(dev)
        for _ in range(math.ceil(seconds / (2 * 256**3 / 1e8))):
            x @ x  # noqa: B018
        (torch.cuda if dev == "cuda" else torch.mps).synchronize()

    with warnings.catch_warnings(), standin(kind, virtual_clock=True, costs=slow):
        warnings.simplefilter("ignore")
        start = _read_all(readers)
        device_work(kind, 2.0)
        work = _moved(start, _read_all(readers))
        start = _read_all(readers)
        _busy(1.2)
        idle = _moved(start, _read_all(readers))
    for name in readers:
        moved, leaked = work[name], idle[name]
        if isinstance(moved, BaseException) or isinstance(leaked, BaseException):
            figure.miss(name, f"raised {_error(moved if isinstance(moved, BaseException) else leaked)}")
        elif leaked > 0.3:
            figure.miss(name, f"real time leaks in: 1.2 s of real, busy time moved it {leaked:.2f} s")
        elif not 1.3 <= moved <= 3.5:
            figure.miss(name, f"2 s of virtual device work moved it {moved:.3f} s")
        else:
            figure.hit()
    for name, stopwatch in _stopwatches().items():
        try:
            with warnings.catch_warnings(), standin(kind, virtual_clock=True, costs=slow):
                warnings.simplefilter("ignore")
                took = stopwatch(lambda: device_work(kind, 2.0))
                idle_time = stopwatch(lambda: _busy(1.2))
        except Exception as exc:  # noqa: BLE001
            figure.miss(name, f"raised {_error(exc)}")
            continue
        if idle_time > 0.3:
            figure.miss(name, f"real time leaks in: 1.2 s of real, busy time timed {idle_time:.2f} s")
        elif not 1.3 <= took <= 3.5:
            figure.miss(name, f"2 s of virtual device work timed {took:.3f} s")
        else:
            figure.hit()
    return figure


SUITES: dict[str, Callable[..., Figure]] = {
    "ops": op_figure, "modules": module_figure, "cost": cost_figure, "autocast": autocast_figure,
    "api": api_figure, "clocks": clock_figure,
}


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
