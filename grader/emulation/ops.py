"""What an aten op does, as PyTorch itself defines it: the work it computes (the FLOP counter's
formulas), whether it moves data between devices, allocates without computing, or only views.

Both the stand-in (grader/emulation/standin.py) and the observer of real devices
(grader/emulation/observer.py) classify every op the dispatcher runs with these — forward and
backward, whatever Python function the learner's code called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count, shape_wrapper

aten = torch.ops.aten


def _cpu_flash_flops(query: Any, key: Any, value: Any, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    return int(sdpa_flop_count(query.shape, key.shape, value.shape))


def _cpu_flash_backward_flops(grad_out: Any, query: Any, key: Any, value: Any, *args: Any, out_val: Any = None,
                              **kwargs: Any) -> int:
    return int(sdpa_backward_flop_count(grad_out.shape, query.shape, key.shape, value.shape))


# torch.utils.flop_counter's formulas (products, convolutions, attention, forward and backward),
# plus this CPU build's own attention kernels: a GPU runs the flash or memory-efficient kernels,
# which the counter knows, where a CPU build decomposes attention into these.
FLOPS: dict[Any, Callable[..., int]] = {
    **flop_registry,
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_flops,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward_flops,
}
# Ops that copy between devices: the only ones allowed to see tensors of two devices.
TRANSFERS = frozenset({aten._to_copy.default, aten.copy_.default, aten._copy_from.default,
                       aten._copy_from_and_resize.default})
# Advanced indexing moves CPU index tensors to the indexed tensor's device itself.
INDEXING = frozenset({aten.index.Tensor, aten.index_put.default, aten.index_put_.default,
                      aten._index_put_impl_.default, aten._unsafe_index.Tensor, aten._unsafe_index_put.default})
# Ops that allocate (or alias) without computing: no kernel runs on a GPU for them.
ALLOCATING = frozenset({aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
                        aten.new_empty.default, aten.new_empty_strided.default, aten.lift_fresh.default,
                        aten.detach.default, aten.alias.default, aten.set_.source_Storage,
                        aten.set_.source_Storage_storage_offset, aten.set_.source_Tensor})
# Not arithmetic on data (what "the computation ran on the device" does not mean): copies, fills,
# reading a value back, pinning.
NOT_ARITHMETIC = TRANSFERS | ALLOCATING | frozenset({
    aten.clone.default, aten.fill_.Scalar, aten.fill_.Tensor, aten.zero_.default, aten._local_scalar_dense.default,
    aten.is_pinned.default, aten._pin_memory.default, aten.record_stream.default})
# The products an autocast region runs in 16 bits, as a GPU computes them (grader/emulation/standin.py,
# ``widened``): the operands exactly widened to float32, products accumulated in float32, the result
# rounded once to its 16-bit dtype.
PRODUCTS = frozenset({aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default})
# Questions about two tensors' metadata that PyTorch answers across devices (dense CPU and CUDA
# tensors are of compatible shallow-copy types; nn.Module.to asks it, and in inference mode the question
# reaches the dispatcher): never a mixing of devices.
QUERIES = frozenset({aten._has_compatible_shallow_copy_type.default, aten.is_same_size.default})
HALF_DTYPES = frozenset({torch.float16, torch.bfloat16})
RANDOM = torch.Tag.nondeterministic_seeded
# Ops whose result's size or value the host must wait for (nonzero, masked_select, unique ...).
SYNCING = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)


def _cudnn_convolution(x: Any, w: Any, padding: Any, stride: Any, dilation: Any, groups: Any,  # noqa: PLR0917 - aten's
                       *_: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return aten.convolution.default, (x, w, None, stride, padding, dilation, False, [0] * len(padding), groups), {}


def _cudnn_convolution_transpose(x: Any, w: Any, padding: Any, output_padding: Any, stride: Any,  # noqa: PLR0917
                                 dilation: Any, groups: Any, *_: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return aten.convolution.default, (x, w, None, stride, padding, dilation, True, output_padding, groups), {}


# cuDNN's own entry points, which a CPU build has no kernel for: the convolution each computes (the
# CUDA stand-in runs that: grader/emulation/standin.py).
CUDNN: dict[Any, Callable[..., tuple[Any, tuple[Any, ...], dict[str, Any]]]] = {
    aten.cudnn_convolution.default: _cudnn_convolution,
    aten.cudnn_convolution_transpose.default: _cudnn_convolution_transpose,
}


@dataclass(frozen=True)
class Op:
    """What the stand-in and the observer ask of an aten op, answered once a process for each op:
    asked of the OpOverload every time, each question hashed it in Python (its ``__hash__`` is a
    Python method) — ten times an op, and its ``tags`` property builds a new list each read."""

    transfer: bool  # copies between devices (TRANSFERS)
    indexing: bool  # INDEXING
    product: bool  # PRODUCTS
    cudnn: bool  # CUDNN
    random: bool  # draws from a generator (randn, dropout ...)
    syncing: bool  # the host must wait for its result to know its size or value (nonzero, unique ...)
    computes: bool  # a GPU runs a kernel for it (views and bare allocations launch none)
    aliases: bool  # a view: its outputs are its input's storage (detach, t, view, split ...), by its schema
    arithmetic: bool  # computes, and is not a copy, fill or read-back (NOT_ARITHMETIC)
    formula: Callable[..., int] | None  # the FLOP counter's formula, if it counts this op
    on_shapes: bool  # the formula takes the arguments' shapes (``_formula``)


_CLASSIFIED: dict[int, tuple[Any, Op]] = {}  # id(func) -> (func, what it is): the func held, its id never reused


def classify(func: Any) -> Op:
    """What ``func`` (an OpOverload) is, for the stand-in and the observer."""
    hit = _CLASSIFIED.get(id(func))
    if hit is not None:
        return hit[1]
    tags = frozenset(func.tags)
    formula, on_shapes = _formula(func)
    computes = not func.is_view and func not in ALLOCATING
    op = Op(transfer=func in TRANSFERS, indexing=func in INDEXING, product=func in PRODUCTS, cudnn=func in CUDNN,
            random=RANDOM in tags, syncing=not tags.isdisjoint(SYNCING), computes=computes, aliases=func.is_view,
            arithmetic=computes and func not in NOT_ARITHMETIC, formula=formula, on_shapes=on_shapes)
    _CLASSIFIED[id(func)] = (func, op)
    return op


# What each formula on shapes counted, by the call's signature (``_signature``): a training repeats
# the same shapes every step, and a formula can cost more than the op it counts — ``addmm_flop``
# calls ``mm_flop`` as registered, wrapped, so that pytree maps its shapes again: 23 us a call here,
# for a 4-us product. The formulas are pure functions of what they are given. Cleared when full.
_COUNTED: dict[tuple[Any, ...], int] = {}
_COUNTED_MAX = 4096


def flops(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """What the FLOP counter counts for this call of ``op`` (0: an op it does not count)."""
    if op.formula is None:
        return 0
    if not op.on_shapes:
        return _count(op, args, kwargs, out)
    try:
        key = (op.formula, _signature(args), _signature(out), _signature(kwargs))
        hit = _COUNTED.get(key)
    except TypeError:  # an argument that cannot be hashed: counted each time
        return _count(op, args, kwargs, out)
    if hit is None:
        if len(_COUNTED) >= _COUNTED_MAX:
            _COUNTED.clear()
        hit = _COUNTED[key] = _count(op, args, kwargs, out)
    return hit


def _count(op: Op, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    assert op.formula is not None
    try:
        if op.on_shapes:
            return int(op.formula(*_shapes(args), out_shape=_shapes(out), **_shapes(kwargs)))
        return int(op.formula(*args, **kwargs, out_val=out))
    except Exception:  # noqa: BLE001 - a formula that does not fit these arguments counts nothing
        return 0


def _signature(obj: Any) -> Any:
    """What a formula on shapes is given of ``obj``, hashable and typed: a tensor by its shape, a
    list or tuple by its type and items, a dict by its items in order, anything else with its type
    (``1``, ``1.0`` and ``True`` are equal keys to a dict)."""
    if isinstance(obj, torch.Tensor):
        return (torch.Tensor, obj.shape)
    if isinstance(obj, (list, tuple)):
        return (type(obj), *[_signature(x) for x in obj])
    if isinstance(obj, dict):
        return (dict, *[(k, _signature(v)) for k, v in obj.items()])
    return (type(obj), obj)


_SHAPE_WRAPPER = shape_wrapper(lambda: 0).__code__  # the code of every formula wrapped so


def _formula(func: Any) -> tuple[Callable[..., int] | None, bool]:
    """The FLOP counter's formula for ``func``, and whether it takes shapes: most are registered
    wrapped in ``shape_wrapper``, which maps every argument to its shape with pytree (a tenth of a
    product's cost on a stand-in); ``_shapes`` does what it does, for the formula it wraps."""
    formula = FLOPS.get(func.overloadpacket)
    inner = getattr(formula, "__wrapped__", None)
    if inner is not None and getattr(formula, "__code__", None) is _SHAPE_WRAPPER:
        return inner, True
    return formula, False


def _shapes(obj: Any) -> Any:
    """``obj`` with every tensor replaced by its shape (torch.utils.flop_counter's ``get_shape``, mapped
    over lists, tuples and dicts as its tree_map maps it)."""
    if isinstance(obj, torch.Tensor):
        return obj.shape
    if isinstance(obj, list):
        return [_shapes(x) for x in obj]
    if isinstance(obj, tuple):
        items = [_shapes(x) for x in obj]
        return tuple(items) if type(obj) is tuple else type(obj)(*items)
    if isinstance(obj, dict):
        return {k: _shapes(v) for k, v in obj.items()}
    return obj


def nbytes(items: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in items)
