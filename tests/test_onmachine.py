"""The learner's top-level statements that ask which machine this is, run again on each machine graded
(grader/learner/onmachine.py), through the learner process's own runner: its top level, then ex1's
simulated machines and the stand-ins' sessions as the judge opens them."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from grader.emulation.patching import LearnerCode, preloaded_modules
from grader.learner.onmachine import MachineStatement
from grader.learner.runner import Runner
from grader.learner.toplevel import TopLevel, TopLevelLimits
from grader.wire.messages import Cell, OpenDevice, OpenWorld, Source
from tests.conftest import ROOT, folder_with

# The lesson's own pattern ("device-agnostic"), nanochat's module-level helpers chosen from it
# (scripts/base_train.py), and statements that must not be run again.
LEARNER = '''
import torch
from torch.cuda import is_available as cuda_ok

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
print("Using device:", device)
synchronize = torch.cuda.synchronize if device.type == "cuda" else lambda: None
HELD = cuda_ok()
ones = torch.ones(2, device=device)
mine = torch.zeros(1) if torch.cuda.is_available() else torch.ones(1)
TRAP = torch.cuda.is_available() and 1 / 0
answer = 42


class Namespace:
    pass


args = Namespace()  # PyTorch's CUDA notes: args = parser.parse_args(); args.device = ...
args.device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
CONFIG = {"amp": None}
CONFIG["amp"] = "bf16" if torch.cuda.is_available() else None


def pick_device():
    return device
'''


def stored(statements: list[MachineStatement]) -> list[tuple[str, ...]]:
    """The names each statement stores to (or into)."""
    return [tuple(place.name for place in statement.places) for statement in statements]


@contextlib.contextmanager
def learner_runner(tmp_path: Path, text: str) -> Iterator[tuple[Runner, types.ModuleType]]:
    """A learner process's runner with ``text`` as its module, its top level run (no judge: requests are
    answered in this process)."""
    before = preloaded_modules()
    source = Source("ex1_device", text, "ex1_device.py", (Cell("line 1", 1, text.count("\n") + 1),))
    runner = Runner(conn=None)  # type: ignore[arg-type]  # nothing is sent
    runner.sources = {"ex1_device": source}
    runner.toplevel = TopLevel(runner.sources, str(tmp_path), TopLevelLimits(), lambda event: None)
    runner.code = LearnerCode(tuple(sorted(runner.toplevel.learner_dirs())), before)
    try:
        runner.toplevel.run_all()
        yield runner, runner.toplevel.module("ex1_device")
    finally:
        while runner.levels:
            runner.close()
        runner.toplevel.close()


def test_the_lesson_s_device_is_chosen_again_on_each_simulated_machine(tmp_path: Path) -> None:
    """The lesson's `device` block and what was computed from it are run again in each of ex1's machines and
    each stand-in session, and put back when it closes; tensor work, a statement that binds nothing, one
    that fails there and one that never asked are not."""
    with learner_runner(tmp_path, LEARNER) as (runner, module):
        statements = runner.toplevel.machine_statements  # type: ignore[union-attr]
        assert stored(statements) == [("device",), ("synchronize",), ("HELD",), ("TRAP",), ("args",),
                                      ("CONFIG",)]
        assert torch.cuda.is_available.__code__.co_name == "is_available"  # nothing left redirected
        assert module.cuda_ok is torch.cuda.is_available  # the learner's name holds PyTorch's own function
        on_cpu = (module.device, module.synchronize, module.ones, module.mine)
        assert module.device == torch.device("cpu") and module.HELD is False

        for request, expected in ((OpenWorld(cuda=True, mps=True), "cuda"), (OpenWorld(cuda=False, mps=True), "mps"),
                                  (OpenDevice("cuda", standin=True), "cuda"), (OpenDevice("mps", standin=True), "mps"),
                                  (OpenWorld(cuda=False, mps=False), "cpu")):
            runner.answer(request)
            assert module.pick_device().type == expected, request
            assert (module.synchronize is torch.cuda.synchronize) == (expected == "cuda")
            assert module.HELD is (expected == "cuda")  # asked through the name the learner held
            assert module.TRAP is False  # 1 / 0 on a CUDA machine: left as it was
            assert module.args.device.type == ("cuda" if expected == "cuda" else "cpu")  # an attribute stored to
            assert module.CONFIG["amp"] == ("bf16" if expected == "cuda" else None)  # and an item
            assert (module.ones, module.mine) == on_cpu[2:]  # tensor work is the demo's: never run again
            runner.close()
            assert (module.device, module.synchronize, module.ones, module.mine) == on_cpu
            assert module.HELD is False
            assert module.args.device.type == "cpu" and module.CONFIG == {"amp": None}


def test_a_statement_that_did_tensor_work_is_never_run_again(tmp_path: Path) -> None:
    """A machine question asked inside a computation (a demo that trains on the chosen device) is the demo's:
    a session that ran it again would pay for the training and record its events as the check's."""
    text = '''
import torch

def pick_device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")

losses = [float(torch.randn(3, device=pick_device()).sum()) for _ in range(3)]
model = torch.nn.Linear(2, 2).to(pick_device())
'''
    with learner_runner(tmp_path, text) as (runner, _):
        assert runner.toplevel.machine_statements == []  # type: ignore[union-attr]


ELSEWHERE = '''
import time
import torch

WARM = torch.cuda.is_available() and [time.sleep(0.05) for _ in range(400)]
RAN = []
if torch.cuda.is_available():  # the lesson's speed test, as a demo cell guards it
    N = 64
    a = torch.randn(N, N, device="cuda")
    b = torch.randn(N, N, device="cuda")
    c = a @ b
    RAN.append("the demo")
else:
    N = 0
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
'''


def test_a_demo_or_a_slow_statement_on_another_machine_is_stopped_and_dropped(tmp_path: Path) -> None:
    """A question whose other branch is a demo (the lesson's speed test under `if torch.cuda.is_available():`) is
    stopped at its first tensor op, and one whose other branch runs long (a warm-up loop) at the re-run's limit:
    their names are left as the top level made them, and no later session of the process runs them again."""
    with learner_runner(tmp_path, ELSEWHERE) as (runner, module):
        statements = runner.toplevel.machine_statements  # type: ignore[union-attr]
        assert stored(statements) == [("WARM",), ("N", "a", "b", "c"), ("device",)]
        runner.answer(OpenDevice("cuda", standin=True))
        assert module.WARM is False and module.N == 0 and not hasattr(module, "c")
        assert module.RAN == []  # stopped at its first tensor op, not after the demo
        assert module.device.type == "cuda"
        assert stored(statements) == [("device",)]
        runner.close()
        runner.answer(OpenWorld(cuda=True, mps=False))
        assert module.WARM is False and module.N == 0 and module.device.type == "cuda"
        runner.close()


def test_a_module_level_synchronize_for_cuda_only_fails_on_the_mac_alone(tmp_path: Path, grade_forked: Any) -> None:
    """nanochat's own line (`torch.cuda.synchronize if device_type == "cuda" else lambda: None`), run again on each
    machine: right on the CUDA stand-in, where it stopped the clock before the work finished when it kept the
    grading machine's choice (the no-op), and still never synchronizing on the simulated Mac. (The folder of
    correct styles that choose at import, idioms/correct/nanochat_module_level_device_type, gets every point in
    tests/test_grade_correct.py: 85 before.)"""
    text = (ROOT / "tests" / "submissions" / "idioms" / "mistakes" / "ex2_timing"
            / "nanochat_module_level_sync_cuda_only.py").read_text(encoding="utf-8")
    graded = grade_forked(folder_with(tmp_path, "nanochat", {"ex2_timing": text}))
    assert graded.report is not None, graded.stderr
    message = graded.check("ex2.synchronizes_before_reading_clock")["message"]
    assert message.startswith("On mps (stand-in)") and "cuda" not in message.split(":")[0], message
