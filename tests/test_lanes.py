"""The course's lanes graded side by side (grader/run/lanes.py): the same verdicts as one run, each lane's
modules run once, a notebook in one run, and a lane that crashes costs only its own checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader.course import load_course
from grader.errors import GraderError
from grader.grading import grade
from grader.run.isolation import probe
from grader.run.lanes import lanes_of, merged
from grader.run.sandbox import SandboxRun
from grader.run.share import lanes_here
from grader.score.results import CheckOutcome, DeviceInfo
from grader.wire.messages import Source
from tests.conftest import ROOT, SHARE, ForkLaunchers, folder_with, solution_text
from tests.submissions.catalog import MODULES
from tests.test_batch import _as_from_a_terminal, _learner_running

COURSE = load_course()
MISTAKES = ROOT / "tests" / "submissions" / "mistakes"


def _sources(modules: dict[str, str]) -> dict[str, Source]:
    return {ex: Source(module, "", f"{module}.py") for ex, module in modules.items()}


def test_the_course_s_lanes_cover_every_exercise_once() -> None:
    named = [ex for lane in COURSE.lanes for ex in lane]
    assert len(COURSE.lanes) >= 2 and sorted(named) == sorted(COURSE.exercise_ids)


def test_checks_split_by_lane_only_where_their_modules_differ() -> None:
    checks = list(COURSE.checks)
    folder = _sources(MODULES)
    split = lanes_of(checks, COURSE.lanes, folder, 2)
    assert [{c.exercise for c in group} for group in split] == [set(lane) for lane in COURSE.lanes]
    assert sorted(c.id for group in split for c in group) == sorted(c.id for c in checks)
    notebook = _sources({ex: "submission" for ex in MODULES})  # one notebook holds every exercise
    assert lanes_of(checks, COURSE.lanes, notebook, 2) == [checks]
    assert lanes_of(checks, COURSE.lanes, folder, 1) == [checks]  # the machine has no core to spare
    only_ex1 = [c for c in checks if c.exercise == "ex1"]  # one lane has checks to run: one run
    assert lanes_of(only_ex1, COURSE.lanes, folder, 2) == [only_ex1]
    assert lanes_of(checks, (), folder, 2) == [checks]  # a course without lanes


def test_runs_merge_as_one() -> None:
    def run(check: str, **kwargs: Any) -> SandboxRun:
        device, notes = kwargs.pop("device", None), kwargs.pop("notes", ())
        return SandboxRun({check: CheckOutcome(check, "passed")}, device, notes, 1, **kwargs)

    cpu = DeviceInfo("cpu", "x86_64", "2.13.0")
    one = merged([run("ex1.a", notes=("tampering",), output="first\n", learner_seconds=1.5),
                  run("ex5.b", device=cpu, notes=("tampering", "wall_clock_limit"), output="second\n",
                      learner_seconds=2.0, out_of_time=True)])
    assert set(one.outcomes) == {"ex1.a", "ex5.b"} and one.device == cpu
    assert one.notes == ("tampering", "wall_clock_limit") and one.output == "first\nsecond\n"
    assert one.children == 2 and one.learner_seconds == 2.0 and one.out_of_time


@pytest.mark.parametrize(("lanes", "why"), [
    ([["ex1", "ex2", "ex3", "ex4"], ["ex5", "ex9"]], "is not an exercise id"),
    ([["ex1", "ex2", "ex3", "ex4"], ["ex5", "ex1"]], "name an exercise twice"),
    ([["ex1", "ex2", "ex3"], ["ex5"]], "leave out ex4"),
    ([["ex1", "ex2", "ex3", "ex4"], []], "must be a list of non-empty lists"),
])
def test_a_course_s_lanes_are_checked_when_it_loads(lanes: Any, why: str, tmp_path: Path) -> None:
    text = (ROOT / "course.yaml").read_text(encoding="utf-8")
    assert "\nlanes: [[ex1, ex2, ex3, ex4], [ex5]]\n" in text
    course = tmp_path / "course.yaml"
    course.write_text(text.replace("\nlanes: [[ex1, ex2, ex3, ex4], [ex5]]\n", f"\nlanes: {lanes}\n"), encoding="utf-8")
    for name in ("exercises", "solutions"):
        (tmp_path / name).symlink_to(ROOT / name)
    with pytest.raises(GraderError, match=why):
        load_course(course)


# Each module's top level says which process ran it (a token drawn once a process: in a sandbox every
# learner process is pid 2): in lanes, ex5's is not ex1's.
PID = ("\nimport builtins as _b, os as _os\n"
       "print('{module} ran in', _b.__dict__.setdefault('_process_token', _os.urandom(8).hex()))\n")


def _graded(folder: Path, fork_launchers: ForkLaunchers, lanes: int) -> Any:
    return grade(folder, COURSE, launcher=fork_launchers.launcher(probe()), lang="en", seed=7, lanes=lanes)


def test_lanes_give_one_run_s_verdicts(tmp_path: Path, fork_launchers: ForkLaunchers) -> None:
    """A learner with a mistake in each lane (ex1 in the first, ex5 in the second), graded in one run and in
    two lanes: every check's status, points and message the same; each module's top level ran once, ex1's
    and ex5's in two learner processes."""
    files = {module: solution_text(ex) + PID.format(module=module) for ex, module in MODULES.items()}
    files["ex1_device"] = (MISTAKES / "ex1_device" / "hardcoded_cuda.py").read_text(encoding="utf-8") + PID.format(
        module="ex1_device")
    files["ex5_amp"] = (MISTAKES / "ex5_amp" / "fp16_no_scaler.py").read_text(encoding="utf-8") + PID.format(
        module="ex5_amp")
    folder = folder_with(tmp_path, "two_mistakes", files)
    one, two = _graded(folder, fork_launchers, 1), _graded(folder, fork_launchers, 2)

    def verdicts(report: Any) -> dict[str, tuple[str, float, str]]:
        return {c.id: (c.status, c.points, c.message) for ex in report.exercises for c in ex.checks}

    assert verdicts(two) == verdicts(one)
    lost = {check for check, (status, _, _) in verdicts(two).items() if status != "passed"}
    assert any(c.startswith("ex1.") for c in lost) and any(c.startswith("ex5.") for c in lost), lost
    for report, processes in ((one, 1), (two, 2)):
        ran = [line.split(" ran in ") for line in report.output.splitlines() if " ran in " in line]
        assert sorted(module for module, _ in ran) == sorted(MODULES.values()), report.output  # each once
        pids = dict(ran)
        assert len(set(pids.values())) == processes and (pids["ex1_device"] == pids["ex5_amp"]) == (processes == 1)


def test_a_lane_that_crashes_costs_only_its_own_checks(tmp_path: Path, fork_launchers: ForkLaunchers) -> None:
    """ex5's learner process ends itself at its first training: the second lane charges ex5's checks and
    restarts for the rest; the first lane's exercises are graded in full."""
    files = {module: solution_text(ex) for ex, module in MODULES.items()}
    files["ex5_amp"] = files["ex5_amp"].replace("\ndef train_steps(", "\ndef _train_steps(") + (
        "\n\ndef train_steps(*args, **kwargs):\n    import os\n    os._exit(3)\n")
    report = _graded(folder_with(tmp_path, "ex5_exits", files), fork_launchers, 2)
    for ex in report.exercises:
        if ex.id == "ex5":
            assert ex.score == 0 and all(c.status != "passed" for c in ex.checks)
        else:
            assert ex.score == ex.max_score, [(c.id, c.status, c.message) for c in ex.checks]


def test_lanes_wait_for_a_core_and_no_gpu() -> None:
    here = lanes_here("auto", True)
    assert lanes_here("cuda", True) == lanes_here("mps", True) == lanes_here("cpu", False) == 1
    assert here in (1, 2) and lanes_here("cpu", True) >= here


def test_a_module_that_imports_another_lane_s_module_finds_it(tmp_path: Path, fork_launchers: ForkLaunchers) -> None:
    """ex5's file takes ex1's `pick_device` (`from ex1_device import pick_device`), as a learner reusing
    their own code does: its lane's learner process runs ex1's top level when ex5 imports it, as one
    run does. (A run that held only its own exercises' modules failed the import: the cell stopped, and a
    `train_steps` that called `pick_device` lost every ex5 point.)"""
    files = {module: solution_text(ex) for ex, module in MODULES.items()}
    files["ex5_amp"] = "from ex1_device import pick_device as _reused\n" + files["ex5_amp"] + (
        "\n\nassert _reused().type in ('cpu', 'cuda', 'mps')\n")
    report = _graded(folder_with(tmp_path, "reuses_ex1", files), fork_launchers, 2)
    assert report.top_level == ()
    assert report.score == report.max_score, [(c.id, c.status, c.message) for e in report.exercises for c in e.checks
                                              if c.status != "passed"]


@pytest.mark.skipif(lanes_here("auto", probe().learners_fork) < 2, reason="grader grade runs one lane on this machine")
def test_a_ctrl_c_ends_every_lane_at_once(tmp_path: Path) -> None:
    """Ctrl-C while ex5's lane waits on a `train_steps` that never returns (its check's limit: 30 s) and ex1's
    lane is done: `grader grade` stops both lanes' processes and exits 130 at once — it waited for the hung
    lane before the lanes' threads were told (``run_checks``'s ``stop``)."""
    files = {"ex1_device": solution_text("ex1"),
             "ex5_amp": solution_text("ex5") + "\n\ndef train_steps(*args, **kwargs):\n    while True:\n        pass\n"}
    folder = folder_with(tmp_path, "hangs_in_ex5", files)
    command = [sys.executable, "-m", "grader", "grade", str(folder), "-o", str(tmp_path / "r.yaml")]
    with subprocess.Popen(command, cwd=ROOT, env={**os.environ, **SHARE.env, "PYTHONPATH": str(ROOT)},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_as_from_a_terminal) as proc:  # noqa: PLW1509 - before exec
        deadline = time.monotonic() + 120
        while not _learner_running(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(5)  # ex5's first check has called the loop by now (its lane's processes were up)
        assert proc.poll() is None, "the grading ended before the Ctrl-C"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)  # the hung check alone would hold it 30 s more
    assert proc.returncode == 130, stderr
    assert "grader: interrupted" in stderr and "Traceback" not in stderr
