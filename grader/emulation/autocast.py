"""Autocast on a stand-in follows the emulated device's policy, not the CPU's.

The stand-in's tensors are CPU tensors, so only PyTorch's AutocastCPU kernels could ever see
them, with CPU autocast's policy (which keeps softmax, layer_norm, sums, exp ... in the low
precision, where CUDA runs them in float32). While a stand-in's autocast is on, Python kernels
apply, to the stand-in's tensors, the policy of the device they stand for (the ops registered on
AutocastCUDA / AutocastMPS in the installed torch, each cast as that device's kernel casts), and to
plain CPU tensors the CPU's own policy; below them no autocast kernel runs (the CPU's own, on the
stand-in's CPU tensors, would cast by the CPU's policy).

The kernels sit on an autocast dispatch key no backend of this machine uses (``_spare_key``: the
IPU's, the HPU's or PrivateUse1's), registered once a process (``kernels``; the learner's fork
server registers them before it forks) and reached only where a stand-in's autocast is on: entering
``torch.autocast(kind)`` adds that key to the thread's dispatch keys, as PyTorch's own autocast
switches its key in each thread, and each kernel asks the stand-in active (``Kernels.active``). A
session used to put its kernels on the AutocastCPU key itself, and take them off at its end:
~200 registrations, 2.5 ms a session and 23 ms at a learner process's first, six times a batch
learner (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import functools
import types
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import torch

from grader.reference.meter import tensors

Cast = Literal["lower", "fp32", "promote", "banned"]
_BCE = ("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
        "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast.")

# Each device's ops that autocast runs in the low precision, or in the widest input type; every
# other op registered on the device's autocast key runs in float32 (aten/src/ATen/autocast_mode.cpp;
# tests/conformance checks these against the installed torch's own kernels).
LOWER: dict[str, frozenset[str]] = {
    "cuda": frozenset({
        "_convolution", "_convolution.deprecated", "_scaled_dot_product_flash_attention", "_thnn_fused_gru_cell",
        "_thnn_fused_lstm_cell", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "conv1d",
        "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input",
        "convolution", "cudnn_convolution", "cudnn_convolution_transpose", "einsum", "gru_cell", "linalg_multi_dot",
        "linalg_vecdot", "linear", "lstm_cell", "matmul", "mm", "mv", "prelu", "rnn_relu_cell", "rnn_tanh_cell",
        "scaled_dot_product_attention"}),
    "mps": frozenset({
        "_convolution", "_convolution.deprecated", "_mps_convolution", "addbmm", "addmm", "addmv", "addr", "baddbmm",
        "bmm", "chain_matmul", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d.input",
        "convolution", "einsum", "linalg_multi_dot", "linear", "lstm_cell", "matmul", "mm", "mv", "prelu",
        "scaled_dot_product_attention"}),
    "cpu": frozenset({
        "conv1d", "conv1d.padding", "conv2d", "conv2d.padding", "conv3d", "conv3d.padding", "bmm", "mm",
        "linalg_vecdot", "baddbmm", "addmm", "_addmm_activation", "addbmm", "linear", "_convolution.deprecated",
        "matmul", "conv_tbc", "mkldnn_rnn_layer", "conv_transpose1d", "conv_transpose2d.input",
        "conv_transpose3d.input", "prelu", "scaled_dot_product_attention", "_native_multi_head_attention"}),
}
PROMOTE: dict[str, frozenset[str]] = {
    "cuda": frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
                       "scatter_add", "tensordot", "vdot"}),
    "mps": frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put",
                      "scatter_add", "tensordot"}),
    "cpu": frozenset({"stack", "cat", "index_copy"}),
}
BANNED: dict[str, dict[str, str]] = {"cuda": {"binary_cross_entropy": _BCE}, "mps": {}, "cpu": {}}
KEYS = {"cuda": "AutocastCUDA", "mps": "AutocastMPS", "cpu": "AutocastCPU"}


def registered(device: str) -> frozenset[str]:
    """The aten ops (``name.overload``) the installed torch registers on ``device``'s autocast key."""
    names = torch._C._dispatch_get_registrations_for_dispatch_key(KEYS[device])
    return frozenset(n.removeprefix("aten::") for n in names if n.startswith("aten::"))


@functools.cache
def policy(device: str) -> Mapping[str, Cast]:
    """Each op's cast on ``device``, as the installed torch's autocast kernels cast: read once a
    process (1 ms a stand-in session, which asked it twice), before any stand-in has put its own
    kernels on the AutocastCPU key."""
    found: dict[str, Cast] = {}
    for name in registered(device):
        found[name] = ("banned" if name in BANNED[device] else "lower" if name in LOWER[device]
                       else "promote" if name in PROMOTE[device] else "fp32")
    return types.MappingProxyType(found)


def _op(name: str) -> Any:
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


# The autocast keys of backends a grader's machine never has, in the order tried: the first that no
# installed package registered a kernel or fallback on carries the stand-in's kernels. Each ranks above
# AutocastCPU, so that on the stand-in's tensors (CPU tensors) they run before the CPU's own kernels could.
SPARE_KEYS = ("AutocastIPU", "AutocastHPU", "AutocastPrivateUse1")
# Below every autocast key: where a kernel of the stand-in's goes on, and so neither the CPU's autocast
# kernels nor another of its own runs again for the same call.
_AFTER = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.AutocastCPU)
_AUTOCAST_CPU = torch._C.DispatchKey.AutocastCPU
_included = torch._C._dispatch_tls_is_dispatch_key_included
_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded


def _spare_key() -> str:
    for name in SPARE_KEYS:
        key = getattr(torch._C.DispatchKey, name, None)
        if key is not None and not torch._C._dispatch_get_registrations_for_dispatch_key(name) \
                and not torch._C._dispatch_has_backend_fallback(key):
            return name
    return SPARE_KEYS[-1]  # every one taken (a backend's package installed for each): its kernels overridden


class Kernels:
    """The stand-ins' autocast kernels, one for every op any policy names, on ``key``: each applies the
    policy of the DeviceAutocast ``active`` (the stand-in open in this process), and goes on below
    autocast where none is. Registered once a process (``kernels``) and never taken off: the key is
    reached only where ``DeviceAutocast`` adds it to a thread's dispatch keys."""

    def __init__(self) -> None:
        import warnings

        self.active: DeviceAutocast | None = None
        self.name = _spare_key()
        self.key = getattr(torch._C.DispatchKey, self.name)
        # excluded inside a kernel's own call, and in the stand-in's CPU kernels (grader/emulation/standin.py)
        self.excluded = torch._C.DispatchKeySet(self.key) | torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
        self._below = torch._C._dispatch_keyset_full_after(self.key)  # where no stand-in is open: the CPU's autocast
        self._libs = [torch.library.Library("aten", "IMPL")]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding a previously registered kernel" (a backend's, if any)
            for name in sorted(set().union(*(policy(kind) for kind in KEYS))):
                try:
                    self._libs[0].impl(name, self._kernel(name, _op(name)), self.name, with_keyset=True)
                except (RuntimeError, AttributeError):
                    continue
            if not torch._C._dispatch_has_backend_fallback(self.key):  # every other op: not autocast here
                fallback = torch.library.Library("_", "IMPL")
                fallback.fallback(torch.library.fallthrough_kernel, self.name)
                self._libs.append(fallback)

    def _kernel(self, name: str, op: Any) -> Callable[..., Any]:
        def autocast_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            active = self.active
            if active is None:  # (a thread that kept the key past its stand-in: as if it had none)
                return op.redispatch(keyset & self._below, *args, **kwargs)
            return active.run(name, op, keyset & _AFTER, args, kwargs)

        return autocast_kernel

    def reachable(self) -> bool:
        """Whether an autocast kernel can run in this thread now: the stand-ins' key among its dispatch keys,
        or the CPU's autocast not excluded from them (the learner's ``torch.autocast("cpu")``). Where neither,
        excluding both (``excluded``) changes nothing, and its guard costs half a microsecond an op."""
        return _included(self.key) or not _excluded(_AUTOCAST_CPU)

    def switch(self, on: bool) -> None:
        """The key in this thread's dispatch keys, or out of them."""
        torch._C._dispatch_tls_set_dispatch_key_included(self.key, on)
        torch._C._dispatch_tls_set_dispatch_key_excluded(self.key, not on)


@functools.cache
def kernels() -> Kernels:
    """This process's ``Kernels`` (registered at the first call: ~3 ms)."""
    return Kernels()


class DeviceAutocast:
    """For a stand-in of ``kind``: what the kernels (``Kernels``) do while it is open — cast its tensors as
    ``kind``'s autocast does, and plain CPU tensors as the CPU's does."""

    def __init__(self, kind: str, on_device: Callable[[torch.Tensor], bool]) -> None:
        self.kind = kind
        self.on_device = on_device
        self.device_policy = policy(kind)
        self.cpu_policy = policy("cpu")
        self.learner_cpu = False  # the learner's own torch.autocast("cpu") is on
        self.device_on = False
        self._cache: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self._kernels = kernels()

    # -- what a kernel does ---------------------------------------------------------------
    def _eligible(self, t: object, device: bool) -> bool:
        return (isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64
                and self.on_device(t) == device)

    def _cast(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if t.dtype == dtype:
            return t
        low = dtype != torch.float32
        cacheable = (low and t.dtype == torch.float32 and t.requires_grad and t.is_leaf and not t._is_view()
                     and torch.is_autocast_cache_enabled())
        if cacheable:
            hit = self._cache.get(id(t))
            if hit is not None and hit[0]() is t:
                return hit[1]
        casted: torch.Tensor = torch.ops.aten._to_copy.default(t, dtype=dtype)
        if cacheable:
            self._cache[id(t)] = (weakref.ref(t), casted)
        return casted

    def run(self, name: str, op: Any, below: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Op ``name`` as this device's autocast runs it (``below``: the dispatch keys under autocast)."""
        leaves = tensors((args, kwargs))
        cast = None
        if self.device_on and any(self._eligible(t, True) for t in leaves):
            device, table, low = True, self.device_policy, torch.get_autocast_dtype(self.kind)
            cast = table.get(name)
        elif self.learner_cpu and any(self._eligible(t, False) for t in leaves):
            device, table, low = False, self.cpu_policy, torch.get_autocast_dtype("cpu")
            cast = table.get(name)
        if cast is None:
            # Not an op this device's autocast casts: as its fallthrough, the ops it is made of
            # are still autocast.
            return op.redispatch(below, *args, **kwargs)
        with torch._C._ExcludeDispatchKeyGuard(self._kernels.excluded):
            if cast == "banned":
                raise RuntimeError(BANNED[self.kind if device else "cpu"][name])
            if cast == "lower":
                target = low
            elif cast == "fp32":
                target = torch.float32
            else:
                eligible = [t for t in leaves if self._eligible(t, device)]
                target = torch.float32 if any(t.dtype == torch.float32 for t in eligible) else low

            def convert(a: Any) -> Any:
                if isinstance(a, torch.Tensor) and self._eligible(a, device):
                    return self._cast(a, target)
                if isinstance(a, (list, tuple)):
                    return type(a)(convert(x) for x in a)
                return a

            return op(*convert(list(args)), **{k: convert(v) for k, v in kwargs.items()})

    # -- switching ------------------------------------------------------------------------
    def set_enabled(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def set_autocast_enabled(*args: Any) -> None:
            device, enabled = (args[0], args[1]) if len(args) == 2 else ("cuda", args[0])
            original(*args)
            if device == self.kind:
                self.device_on = bool(enabled)
            elif device == "cpu":
                self.learner_cpu = bool(enabled)
            else:
                return
            self._kernels.switch(self.device_on or self.learner_cpu)

        return set_autocast_enabled

    def clear_cache(self, original: Callable[[], None]) -> Callable[[], None]:
        def clear_autocast_cache() -> None:
            self._cache.clear()
            original()

        return clear_autocast_cache

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The stand-in's autocast while the stand-in is open: the kernels ask this one, and the learner's
        ``torch.autocast(kind)`` and ``torch.autocast("cpu")`` switch them on in their thread. The CPU's own
        autocast state is the learner's, as set (its kernels never run below the stand-in's)."""
        saved = (torch.set_autocast_enabled, torch.clear_autocast_cache, torch.is_autocast_enabled("cpu"),
                 self._kernels.active)
        torch.set_autocast_enabled = self.set_enabled(saved[0])
        torch.clear_autocast_cache = self.clear_cache(saved[1])
        self.learner_cpu = saved[2]
        self.device_on = bool(torch.is_autocast_enabled(self.kind))
        self._kernels.active = self
        self._kernels.switch(self.device_on or self.learner_cpu)
        try:
            yield
        finally:
            outer = saved[3]
            self._kernels.switch(outer is not None and (outer.device_on or outer.learner_cpu))
            self._kernels.active = outer
            torch.set_autocast_enabled, torch.clear_autocast_cache = saved[:2]
            saved[0]("cpu", saved[2])
            self._cache.clear()
