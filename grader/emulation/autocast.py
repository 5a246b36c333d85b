"""Autocast on a stand-in follows the emulated device's policy, not the CPU's.

The stand-in's tensors are CPU tensors, so only PyTorch's AutocastCPU kernels could ever see
them, with CPU autocast's policy (which keeps softmax, layer_norm, sums, exp ... in the low
precision, where CUDA runs them in float32). While a stand-in is active, Python kernels on the
AutocastCPU key apply, to the stand-in's tensors, the policy of the device they stand for (the
ops registered on AutocastCUDA / AutocastMPS in the installed torch, each cast as that device's
kernel casts), and to plain CPU tensors the CPU's own policy; entering ``torch.autocast(kind)``
switches the AutocastCPU key on for the duration. Removed when the stand-in ends.
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


_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_AFTER = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.AutocastCPU)


class DeviceAutocast:
    """For a stand-in of ``kind``: AutocastCPU kernels that cast its tensors as ``kind``'s autocast does."""

    def __init__(self, kind: str, on_device: Callable[[torch.Tensor], bool]) -> None:
        self.kind = kind
        self.on_device = on_device
        self.device_policy = policy(kind)
        self.cpu_policy = policy("cpu")
        self.learner_cpu = False  # the learner's own torch.autocast("cpu") is on
        self.device_on = False
        self._cache: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}
        self._lib: Any = None

    # -- the kernels ----------------------------------------------------------------------
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

    def kernel(self, name: str) -> Callable[..., Any]:
        op = _op(name)

        def autocast_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
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
                return op.redispatch(keyset & _AFTER, *args, **kwargs)
            with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
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

        return autocast_kernel

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
            if self.device_on or self.learner_cpu:
                self._register()
            original("cpu", self.device_on or self.learner_cpu)

        return set_autocast_enabled

    def _register(self) -> None:
        """The kernels, the first time autocast is switched on (most sessions never do): ~200 ops."""
        if self._lib is not None:
            return
        import warnings

        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding a previously registered kernel": that is the point
            for name in sorted(set(self.device_policy) | set(self.cpu_policy)):
                try:
                    lib.impl(name, self.kernel(name), "AutocastCPU", with_keyset=True)
                except (RuntimeError, AttributeError):
                    continue
        self._lib = lib

    def is_enabled(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def is_autocast_enabled(*args: Any, **kwargs: Any) -> bool:
            device = args[0] if args else kwargs.get("device_type", "cuda")
            if device == "cpu":
                return self.learner_cpu
            return bool(original(*args, **kwargs))

        return is_autocast_enabled

    def clear_cache(self, original: Callable[[], None]) -> Callable[[], None]:
        def clear_autocast_cache() -> None:
            self._cache.clear()
            original()

        return clear_autocast_cache

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        saved = (torch.set_autocast_enabled, torch.is_autocast_enabled, torch.clear_autocast_cache,
                 torch.is_autocast_enabled("cpu"))
        torch.set_autocast_enabled = self.set_enabled(saved[0])
        torch.is_autocast_enabled = self.is_enabled(saved[1])
        torch.clear_autocast_cache = self.clear_cache(saved[2])
        self.learner_cpu = saved[3]
        self.device_on = bool(saved[1](self.kind))
        if self.device_on:
            self._register()
        try:
            yield
        finally:
            torch.set_autocast_enabled, torch.is_autocast_enabled, torch.clear_autocast_cache = saved[:3]
            saved[0]("cpu", saved[3])
            self._cache.clear()
            if self._lib is not None:
                self._lib._destroy()
                self._lib = None

