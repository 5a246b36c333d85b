"""The grader's PyTorch modes leave their stack from under whatever the learner's code left on top.

PyTorch's own ``TorchFunctionMode.__exit__`` and ``TorchDispatchMode.__exit__`` pop the top of their
stack, whichever mode is there. The grader enters modes around the learner's code: a stand-in's
Surface and dispatcher (grader/emulation/), the Observer, a call's MemoryMeter (meter.py), a cell's
PartedProducts (grader/learner/longcalls.py). A learner's function that enters a mode and returns
without leaving it (a profiling or logging mode's ``__enter__()`` with no ``__exit__``, harmless on a
real device) put its mode above the grader's, and the grader's exit took the learner's mode off and
left its own behind. Measured: the reference solution whose ex3 `roundtrip` entered a pass-through
TorchFunctionMode and TorchDispatchMode lost 15 points: with the stand-ins' own modes left on the
stacks by the sessions before, the MPS stand-in's round trips reached the real (absent) MPS backend
(tests/test_modes.py).

With ``LeavesFromUnder`` first among its bases, a mode's exit sets the modes above it aside, lets
PyTorch's exit pop it, and puts them back in their order: the learner's mode stays active, as it would
on a real device where the grader's modes do not exist. A mode the learner's code already took off is
left as it is. Runs in both processes (the judge meters its reference with MemoryMeter).
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _python_dispatch


@dataclass(frozen=True)
class _Stack:
    length: Callable[[], int]
    pop: Callable[[], Any]
    push: Callable[[Any], None]


_FUNCTION = _Stack(torch._C._len_torch_function_stack, torch.overrides._pop_mode, torch.overrides._push_mode)
_DISPATCH = _Stack(torch._C._len_torch_dispatch_stack, _python_dispatch._pop_mode, _python_dispatch._push_mode)


def _code(owner: Any, name: str) -> types.CodeType | None:
    """The code of ``owner.name``, a function or a ``contextlib.contextmanager`` (its generator's), if it exists."""
    func = getattr(owner, name, None)
    func = getattr(func, "__wrapped__", func)
    code = getattr(func, "__code__", None)
    return code if isinstance(code, types.CodeType) else None


# PyTorch's own Python that takes modes off a stack and puts them back: each torch function written in Python
# (F.relu, F.cross_entropy, Tensor.__format__ ...) runs a mode's ``__torch_function__`` inside ``with
# _pop_mode_temporarily()``, and ``_disable_current_modes`` (the grader's synchronize, PyTorch's own) empties the
# stacks for its ``with``. Between a pop and the ``with`` taking it, a generator holds the popped modes until it
# finishes; cut there, it finished only when it died, and pushed them back whenever that was
# (grader/learner/toplevel.py ``must_wait`` waits such a cut out). Where a release lacks one, it is left out.
TORCH_STACK_GENERATORS = frozenset(code for code in (
    _code(torch.overrides, "_pop_mode_temporarily"), _code(_python_dispatch, "_pop_mode_temporarily"),
    _code(_python_dispatch, "_disable_current_modes")) if code is not None)
TORCH_STACK_CODE = TORCH_STACK_GENERATORS | frozenset(code for code in (
    _code(torch.overrides, "_push_mode"), _code(torch.overrides, "_pop_mode"),
    _code(_python_dispatch, "_push_mode"), _code(_python_dispatch, "_pop_mode")) if code is not None)


@contextlib.contextmanager
def off() -> Iterator[None]:
    """The grader's own tensor work with no mode on, as outside any session: no torch-function mode (a
    stand-in's surface, a learner's) and no dispatch mode (a stand-in's, the observer's, a meter, a learner's).
    (grader/wire/values.py, a layer below this one, turns both off the same way.)"""
    with torch._C.DisableTorchFunction(), _python_dispatch._disable_current_modes():
        yield


def leave_from_under(mode: Any, exit_on_top: Callable[[], Any]) -> None:
    """Take ``mode`` off its stack wherever it is: ``exit_on_top()`` (PyTorch's own exit, which pops
    the top) runs with ``mode`` on top, and the modes that were above it go back above, in order."""
    stack = _FUNCTION if isinstance(mode, TorchFunctionMode) else _DISPATCH
    above: list[Any] = []
    found = False
    while stack.length() > 0:
        top = stack.pop()
        if top is mode:
            stack.push(top)
            found = True
            break
        above.append(top)
    try:
        if found:
            exit_on_top()
    finally:
        for other in reversed(above):
            stack.push(other)


def clear() -> None:
    """Take every mode off both stacks, as a fresh process has them (grader/learner/torchstate.py)."""
    for stack in (_FUNCTION, _DISPATCH):
        while stack.length() > 0:
            stack.pop()


class LeavesFromUnder:
    """Put first among a TorchFunctionMode's or TorchDispatchMode's bases: its exit leaves from under
    whatever the learner's code left on top (the module's docstring)."""

    def __exit__(self, *exc: object) -> None:
        leave_from_under(self, functools.partial(super().__exit__, *exc))  # type: ignore[misc]
