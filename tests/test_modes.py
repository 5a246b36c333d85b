"""PyTorch modes the learner's code leaves on the stack (grader/reference/modes.py, grader/learner/torchstate.py):
the grader's own modes leave from under them, and each check starts with none, as a fresh process."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from grader import emulation, judge, learner, reference
from grader.learner.longcalls import PartedProducts
from grader.reference.meter import MemoryMeter
from grader.reference.modes import LeavesFromUnder
from tests.conftest import folder_with, solution_text
from tests.submissions.catalog import MODULES


class CountingCalls(TorchFunctionMode):
    """A learner's pass-through mode that counts the torch functions it sees (tests/test_longcalls.py too)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls += 1
        return func(*args, **(kwargs or {}))


class _CountingOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops += 1
        return func(*args, **(kwargs or {}))


class _GradersFunctionMode(LeavesFromUnder, TorchFunctionMode):
    pass


def _function_stack() -> list[Any]:
    return list(torch.overrides._get_current_function_mode_stack())


def _dispatch_stack() -> list[Any]:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return list(_get_current_dispatch_mode_stack())


def test_a_graders_function_mode_leaves_from_under_the_learners() -> None:
    before = _function_stack()
    ours, learners = _GradersFunctionMode(), CountingCalls()
    ours.__enter__()
    learners.__enter__()  # a learner's function entered it and returned without leaving it
    ours.__exit__(None, None, None)
    try:
        assert _function_stack() == [*before, learners]
        torch.ones(2) + 1
        assert learners.calls == 2
    finally:
        learners.__exit__(None, None, None)
    assert _function_stack() == before


def test_a_graders_dispatch_mode_leaves_from_under_the_learners() -> None:
    before = _dispatch_stack()
    meter, learners = MemoryMeter(None, "cpu"), _CountingOps()
    meter.__enter__()
    learners.__enter__()
    torch.ones(3)
    meter.__exit__(None, None, None)
    try:
        assert _dispatch_stack() == [*before, learners]
        assert meter.peak > 0  # it counted while it was on the stack
        ops = learners.ops
        torch.ones(2) + 1
        assert learners.ops > ops
    finally:
        learners.__exit__(None, None, None)
    assert _dispatch_stack() == before


def test_a_graders_mode_the_learner_already_took_off_takes_nothing_else() -> None:
    before = _function_stack()
    ours, learners = _GradersFunctionMode(), CountingCalls()
    ours.__enter__()
    torch.overrides._pop_mode()  # the learner's code popped it
    learners.__enter__()
    ours.__exit__(None, None, None)
    try:
        assert _function_stack() == [*before, learners]
    finally:
        learners.__exit__(None, None, None)


def _grader_modes() -> list[type]:
    """Every TorchFunctionMode and TorchDispatchMode defined where the grader's code runs beside torch (the
    packages that import it: their entry points aside)."""
    found = []
    names = [info.name for package in (emulation, learner, reference, judge)
             for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}.")]
    for name in names:
        if name.endswith(".__main__"):
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and value.__module__ == name
                    and issubclass(value, (TorchFunctionMode, TorchDispatchMode))):
                found.append(value)
    return found


def test_every_mode_the_grader_defines_leaves_from_under() -> None:
    """A mode added later that exits as PyTorch's does (popping the top, whatever it is) fails here."""
    modes = _grader_modes()
    assert {m.__name__ for m in modes} >= {"Surface", "_Dispatch", "Observer", "MemoryMeter", "PartedProducts"}
    for mode in modes:
        leaves = issubclass(mode, LeavesFromUnder) or mode.__exit__ is PartedProducts.__exit__
        assert leaves, f"{mode.__module__}.{mode.__qualname__} exits by popping the top of PyTorch's stack"


# A top level that leaves modes behind: each raises on whatever reaches it, so a check that ran
# through one would fail. A fresh process has none; each check starts as one (runner.py's reset).
LEFT_BY_THE_TOP_LEVEL = '''

from torch.overrides import TorchFunctionMode as _FunctionMode
from torch.utils._python_dispatch import TorchDispatchMode as _DispatchMode


class _EveryFunction(_FunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise RuntimeError("a mode the top level left")


class _EveryOp(_DispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise RuntimeError("a dispatch mode the top level left")


torch.device("meta").__enter__()  # a `with torch.device(...)` block its cell's limit cut
_EveryOp().__enter__()
_EveryFunction().__enter__()
'''

# ex3's function enters pass-through modes (a profiling helper) and returns without leaving them:
# harmless on a real device, where the grader's modes do not exist.
ENTERED_BY_A_FUNCTION = '''
from torch.overrides import TorchFunctionMode as _FunctionMode
from torch.utils._python_dispatch import TorchDispatchMode as _DispatchMode


class _Log(_FunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _LogOps(_DispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def roundtrip(x, device):
    _Log().__enter__()
    _LogOps().__enter__()
    return _roundtrip(x, device)
'''


def test_modes_the_learners_code_leaves_cost_a_correct_submission_nothing(tmp_path: Path, grade_forked: Any) -> None:
    """End to end, on every stand-in and the CPU. Before: the three modes left by the top level made each
    check's reset fail and the whole grading read as tampering (0/100); the dispatch mode alone, 23/100;
    `torch.device("meta")` alone, 70/100 (ex4 a grader error, ex5 "not attempted"); ex3's modes, 85/100
    (the stand-ins' exits popped the learner's modes and left their own, so the MPS stand-in's round trips
    reached the real, absent MPS backend)."""
    files = {module: solution_text(ex) for ex, module in MODULES.items()}
    ex3 = files[MODULES["ex3"]]
    assert "\ndef roundtrip(" in ex3
    files[MODULES["ex3"]] = ex3.replace("\ndef roundtrip(", "\ndef _roundtrip(") + ENTERED_BY_A_FUNCTION
    files[MODULES["ex5"]] += LEFT_BY_THE_TOP_LEVEL
    graded = grade_forked(folder_with(tmp_path, "modes_left", files))
    report = graded.report
    assert graded.code == 0 and report is not None, graded.stderr
    assert report["notes"] == []
    lost = [(c["id"], c["status"], c["message"]) for e in report["exercises"].values() for c in e["checks"]
            if c["status"] != "passed"]
    assert report["score"] == report["max_score"], lost

