"""A matrix product too large for its cell, run in parts that the cell's limit can stop.

A demo cell can hold one product that runs for many seconds on the grading machine's CPU: the
lesson's own speed test multiplies two 10000 × 10000 matrices, 2 TFLOP, 22 s on one core of this
project's machine. Inside one C call the cell's alarm (toplevel.py) waits for the call to end, so the
parent killed the process GRACE_S after the cell's limit and a fresh process ran the other cells
again (grader/run/sandbox.py): 13 s of CPU and a restart for a cell that costs no points.

While a top-level cell runs (never a check's call: those run as the learner wrote them), this mode
computes a CPU product of at least PART_FLOP as blocks of its rows, one C call each of about
PART_FLOP. The alarm then lands between two blocks, and the cell stops at its limit as any other
does. And once the blocks done so far (at least PACE_S of them) say that the rest needs more than
PACE_MARGIN times the time the cell has left, at the pace they ran, the cell stops there, a timeout
like the others: its error says what was measured. A block of rows of a product is those rows of
the product, and with no block thinner than MIN_ROWS (a last block of one row made MKL take another
path) MKL's are bit for bit the same: 300 of 300 shapes and block sizes here, float32 and float64,
and tests/test_longcalls.py checks the products it names on the build it runs on.

The products: ``@``, ``torch.matmul``, ``torch.mm`` and ``torch.bmm`` (functions and methods) of two
plain strided CPU tensors of one floating or complex dtype, at least 2-D each, with no ``out=`` and
no graph to record (a product that needs its gradient runs whole). Other long C calls (a huge
convolution, a sort) still end at the parent's kill.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _pop_mode, _push_mode

from grader.learner.onmachine import is_tensor_work
from grader.reference.modes import LeavesFromUnder, leave_from_under

PART_FLOP = 2e10  # ~0.2 s on one core here (93 GFLOP/s); smaller products run whole
MIN_ROWS = 128  # thinner blocks re-read the right-hand matrix too often (64 rows: +20 % time, measured)
PACE_S = 0.3  # the blocks that must have run before their pace is read
PACE_MARGIN = 2.0  # the rest must need this many times the time left: a machine's load can halve it

_PRODUCTS = frozenset({torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm,
                       torch.bmm, torch.Tensor.bmm})
_PLAIN = (torch.Tensor, torch.nn.Parameter)


class OutlastsCell(BaseException):
    """The product's pace says the cell cannot end in its time. Not an Exception, as TimeUp is not:
    ``except Exception`` in the learner's code lets it through."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class PartedProducts(TorchFunctionMode):
    """Large CPU products in blocks of rows; ``time_left()`` is the running cell's."""

    def __init__(self, time_left: Callable[[], float], *, clock: Callable[[], float] = time.monotonic,
                 part_flop: float = PART_FLOP) -> None:
        super().__init__()
        self.time_left = time_left
        self.clock = clock  # the real clock, taken before the learner's code could replace time.monotonic
        self.part_flop = part_flop
        # Torch functions called under it that compute with tensors: a top-level statement that made none did no
        # tensor work (grader/learner/onmachine.py ``is_tensor_work``).
        self.calls = 0

    def __enter__(self) -> PartedProducts:
        _push_mode(self)
        return self

    def __exit__(self, *exc: object) -> None:
        """Off the stack wherever the cell left it: a mode the learner's cell entered and never left
        stays (PyTorch's own exit pops whatever is on top; grader/reference/modes.py)."""
        leave_from_under(self, _pop_mode)

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        if is_tensor_work(func):
            self.calls += 1
        if func in _PRODUCTS and not kwargs and len(args) == 2 and not torch.compiler.is_compiling():
            rows = _rows(args[0], args[1], self.part_flop)
            if rows:
                return self._parted(func, args[0], args[1], rows)
        return func(*args, **(kwargs or {}))

    def _parted(self, func: Any, a: torch.Tensor, b: torch.Tensor, rows: int) -> torch.Tensor:
        m = a.shape[-2]
        started = self.clock()
        first = func(a.narrow(-2, 0, rows), b)
        # Where the whole product would be: a default device the learner set (``torch.set_default_device``,
        # a mode under this one) is for factories, and this is not the learner's factory.
        out = torch.empty((*first.shape[:-2], m, first.shape[-1]), dtype=first.dtype, device=first.device)
        out.narrow(-2, 0, rows).copy_(first)
        del first
        done = rows
        while done < m:
            self._pace(a, b, done, self.clock() - started)
            part = rows if m - done >= 2 * rows else m - done  # the last block takes the rest: none is thinner
            out.narrow(-2, done, part).copy_(func(a.narrow(-2, done, part), b))
            done += part
        return out

    def _pace(self, a: torch.Tensor, b: torch.Tensor, done: int, elapsed: float) -> None:
        if elapsed < PACE_S:
            return
        m = a.shape[-2]
        rest = elapsed * (m - done) / done
        left = self.time_left()
        if rest > PACE_MARGIN * left:
            tflop = _flop(a, b) / 1e12
            raise OutlastsCell(f"its matrix product ({tflop:.2g} TFLOP) was {done / m:.0%} done after {elapsed:.1f} s, "
                               f"about {rest:.0f} s more at that pace with {max(left, 0.0):.1f} s left")


# The code that changes PyTorch's mode stack: the cell's alarm must not land inside it. Cut between
# `_push_mode` and `return` in __enter__, the mode stayed on the stack for the rest of the process (its
# `with` never began, so nothing took it off): the checks then ran through it, which they never should.
# Cut inside __exit__, modes a learner's cell left above it were popped and never pushed back. An alarm
# that lands here waits, as one inside an import does (grader/learner/toplevel.py ``_on_alarm``).
# The same holds for every grader mode's exit (grader/reference/modes.py), which a learner's call can reach
# inside a check: a stand-in's Surface enters and leaves itself to format a tensor the learner prints.
UNCUT = frozenset({PartedProducts.__enter__.__code__, PartedProducts.__exit__.__code__,
                   LeavesFromUnder.__exit__.__code__, leave_from_under.__code__})


def _flop(a: torch.Tensor, b: torch.Tensor) -> int:
    """The product's FLOPs; -1 when the batch shapes do not broadcast (PyTorch then says so)."""
    batch = _batch(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return -1 if batch is None else 2 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def _batch(x: tuple[int, ...], y: tuple[int, ...]) -> int | None:
    """How many matrices the broadcast batch holds (not ``torch.broadcast_shapes``: its first call
    imports sympy, 0.35 s of a learner process that never needed it)."""
    n = max(len(x), len(y))
    batch = 1
    for p, q in zip((1,) * (n - len(x)) + x, (1,) * (n - len(y)) + y, strict=True):
        if p != q and 1 not in (p, q):
            return None
        batch *= q if p == 1 else p
    return batch


def _rows(a: Any, b: Any, part_flop: float) -> int:
    """The rows of a block when ``a @ b`` is a product to run in parts, else 0."""
    if type(a) not in _PLAIN or type(b) not in _PLAIN:
        return 0
    if a.device.type != "cpu" or b.device.type != "cpu" or a.layout != torch.strided or b.layout != torch.strided:
        return 0
    if a.dim() < 2 or b.dim() < 2 or a.dtype != b.dtype or not (a.is_floating_point() or a.is_complex()):
        return 0
    if a.shape[-1] != b.shape[-2] or (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
        return 0  # torch's own error; autograd records the whole product
    flop = _flop(a, b)
    if flop < part_flop:
        return 0
    rows = max(MIN_ROWS, math.ceil(a.shape[-2] * part_flop / flop))
    return rows if 2 * rows <= a.shape[-2] else 0
