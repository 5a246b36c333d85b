"""What an aten op does, as PyTorch itself defines it: the work it computes (the FLOP counter's
formulas), whether it moves data between devices, allocates without computing, or only views.

Both the stand-in (grader/emulation/standin.py) and the observer of real devices
(grader/emulation/observer.py) classify every op the dispatcher runs with these — forward and
backward, whatever Python function the learner's code called.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count

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
HALF_DTYPES = frozenset({torch.float16, torch.bfloat16})
RANDOM = torch.Tag.nondeterministic_seeded
# Ops whose result's size or value the host must wait for (nonzero, masked_select, unique ...).
SYNCING = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)


@functools.cache
def _tags(func: Any) -> frozenset[Any]:
    return frozenset(func.tags)  # the property builds a new list from C++ each time: 2.5 µs an op


def random(func: Any) -> bool:
    """Whether the op draws from a generator (randn, dropout ...)."""
    return RANDOM in _tags(func)


def syncing(func: Any) -> bool:
    """Whether the host must wait for the op's result to know its size or value."""
    return not _tags(func).isdisjoint(SYNCING)


def flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """What the FLOP counter counts for this call (0: an op it does not count)."""
    formula = FLOPS.get(func.overloadpacket)
    if formula is None:
        return 0
    try:
        return int(formula(*args, **kwargs, out_val=out))
    except Exception:  # noqa: BLE001 - a formula that does not fit these arguments counts nothing
        return 0


def nbytes(items: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in items)


def computes(func: Any) -> bool:
    """Whether a GPU runs a kernel for it (views and bare allocations launch none)."""
    return not func.is_view and func not in ALLOCATING


def arithmetic(func: Any) -> bool:
    return computes(func) and func not in NOT_ARITHMETIC
