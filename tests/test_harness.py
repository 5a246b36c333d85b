"""The harness end to end: broken files, notebooks, folders, crashes, forgeries, usage errors."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml
from nbformat import v4

from grader.wire.codec import encode
from grader.wire.framing import Connection
from grader.wire.messages import START_SEQ, CheckEnded, Done, GraderBroken, Hello, Plan, PlannedCheck, Start
from grader.wire.signed import parse
from tests.conftest import (
    ROOT,
    ForkLaunchers,
    Graded,
    copy_solutions,
    course_with,
    folder_with,
    in_process,
    run_cli,
    solution_text,
)

CRASH_ROUNDTRIP = '''
import os
import torch

def roundtrip(x, device):
    os._exit(0)

def to_numpy(t):
    return t.detach().cpu().numpy()
'''

SEGFAULT_TIMING = '''
import ctypes
import torch

SMALL_N_ANSWER = "B"

def time_matmul(n, device, repeats=5):
    ctypes.string_at(0)  # reads address 0: SIGSEGV

def speedup(n, device, repeats=3):
    return 1.0
'''


def _notebook_with_magics() -> str:
    cells = [
        v4.new_markdown_cell("# Bài 14 — bài tập"),
        v4.new_code_cell("%matplotlib inline\n!pip install -q torch\nfrom google.colab import drive"),
        v4.new_code_cell("%%bash\nnvidia-smi\n"),
        v4.new_code_cell(solution_text("ex1") + "\n# Vietnamese: thiết bị\nprint(pick_device())"),
        v4.new_code_cell(solution_text("ex3")),
        v4.new_code_cell("torch.cuda?"),
    ]
    return str(nbformat.writes(v4.new_notebook(cells=cells)))


WRONG_EX1 = "import torch\n\ndef pick_device():\n    return 'cpu'\n\ndef describe_device(device):\n    return {}\n"


@pytest.fixture(scope="module")
def harness_class(tmp_path_factory: pytest.TempPathFactory,
                  fork_launchers: ForkLaunchers) -> tuple[Path, Callable[[str], Graded]]:
    """Every submission below that the course grades as it is, graded by one ``grader batch
    --workers 2`` (in-process, each sandbox forked from the session's warm servers), as a class: one
    exec'd ``grader grade`` each cost two fresh Pythons importing torch. Returns the class folder and learner -> report
    (with the batch's exit code and output)."""
    root = tmp_path_factory.mktemp("harness")
    cls = root / "class"
    cls.mkdir()
    (cls / "learner.py").write_text("import torch\n\ndef pick_device(:\n    return torch.device('cpu')\n",
                                    encoding="utf-8")
    (cls / "bai14.ipynb").write_text(_notebook_with_magics(), encoding="utf-8")
    (cls / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    bom = "# Bài tập — thiết bị\r\n" + solution_text("ex1").replace("\n", "\r\n")
    (cls / "bom").mkdir()
    (cls / "bom" / "ex1_device.py").write_bytes(b"\xef\xbb\xbf" + bom.encode("utf-8"))
    crashy = copy_solutions(cls, "crashy", only=("ex1", "ex5"))
    (crashy / "ex3_roundtrip.py").write_text(CRASH_ROUNDTRIP, encoding="utf-8")
    (crashy / "ex2_timing.py").write_text(SEGFAULT_TIMING, encoding="utf-8")
    exits = copy_solutions(cls, "exits", only=("ex1",))
    (exits / "ex3_roundtrip.py").write_text("import os\nos._exit(3)\n\n" + solution_text("ex3"), encoding="utf-8")
    for name, attack in FORGERIES.items():
        folder_with(cls, name, {"ex1_device": WRONG_EX1 + "\n" + attack})
    folder_with(cls, "patcher", {"ex1_device": solution_text("ex1") + FORGERIES["patches_pytest"]})
    out = root / "out"
    proc = in_process(["batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en", "--quiet"],
                      fork_launchers)

    def report(name: str) -> Graded:
        path = out / f"{name}.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
        return Graded(*proc, data)

    return root, report


def test_syntax_error_is_a_result_naming_file_and_line(harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    graded = harness_class[1]("learner")
    assert graded.code == 0
    assert graded.report is not None and graded.report["score"] == 0.0
    check = graded.check("ex1.pick_device_returns_device")
    assert check["status"] == "error"
    assert "learner.py, line 3" in check["message"] and "SyntaxError" in check["message"]
    assert "Traceback" not in graded.stderr
    assert [(s["where"], s["kind"]) for s in graded.report["top_level"]] == [("learner.py, line 3", "syntax_error")]


def test_notebook_with_magics_and_colab_imports(harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    graded = harness_class[1]("bai14")
    assert graded.code == 0, graded.stderr
    assert graded.report is not None and graded.report["learner"] == "bai14"
    assert graded.exercise("ex1")["status"] == "passed"
    assert graded.exercise("ex3")["status"] == "passed"
    assert graded.exercise("ex2")["status"] == "not_attempted"


def test_broken_notebook_json_is_a_result(harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    graded = harness_class[1]("broken")
    assert graded.code == 0
    assert graded.report is not None and graded.report["score"] == 0.0
    assert "broken.ipynb" in graded.check("ex1.pick_device_returns_device")["message"]


def test_bom_crlf_vietnamese_source(harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    graded = harness_class[1]("bom")
    assert graded.exercise("ex1")["status"] == "passed"


def test_crash_in_one_exercise_spares_the_others(harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    graded = harness_class[1]("crashy")
    assert graded.code == 0, graded.stderr
    assert graded.exercise("ex1")["status"] == "passed"
    assert graded.exercise("ex5")["status"] == "passed"
    died = graded.check("ex3.roundtrip_values")
    assert died["status"] == "error" and "exit code 0" in died["message"]
    segv = graded.check("ex2.time_matmul_returns_seconds")
    assert segv["status"] == "error" and "SIGSEGV" in segv["message"]
    assert graded.check("ex2.small_n_answer")["status"] == "passed"
    assert graded.check("ex3.to_numpy_cpu")["status"] == "passed"


def test_exit_at_top_level_is_recorded_and_the_rest_runs(harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    graded = harness_class[1]("exits")
    assert graded.exercise("ex1")["status"] == "passed"
    # The statement that ended the process is skipped by the next process; the functions after it count.
    assert graded.exercise("ex3")["status"] == "passed"
    assert [(s["where"], s["kind"]) for s in graded.report["top_level"]] == [("ex3_roundtrip.py, line 2",
                                                                               "ended_process")]


def test_endless_loop_times_out(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    endless = "def roundtrip(x, device):\n    while True:\n        pass\n"
    folder = folder_with(tmp_path, "loop", {"ex3_roundtrip": endless})
    course = course_with(tmp_path, {"check_timeout_s: 30": "check_timeout_s: 3"})
    graded = grade_forked(folder, "--course", str(course))
    check = graded.check("ex3.roundtrip_values")
    assert check["status"] == "timeout", check
    assert graded.exercise("ex3")["status"] == "timeout"


FORGERIES = {
    "prints_report": 'print("score: 100.0\\nmax_score: 100.0")\nprint("PASSED " * 50)\n',
    "writes_report_files": (
        "import pathlib\n"
        "for p in ('report.yaml', '../report.yaml', 'results.json'):\n"
        "    pathlib.Path(p).write_text('score: 100.0\\n')\n"
    ),
    "writes_every_fd": (
        "import json, os\n"
        "line = json.dumps({'event': 'result', 'check': 'ex1.pick_device_returns_device', 'status': 'passed'})\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        os.write(fd, ('0' * 64 + ' ' + line + '\\n').encode())\n"
        "    except OSError:\n"
        "        pass\n"
    ),
    "patches_pytest": "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n",
    "exits_zero_early": "import os\nos._exit(0)\n",
}


def test_forgeries_do_not_raise_the_score(harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    root, graded_as = harness_class
    for name in FORGERIES:
        graded = graded_as(name)
        assert graded.code == 0, (name, graded.stderr)
        assert graded.report is not None
        assert graded.exercise("ex1")["score"] == 0.0, (name, graded.exercise("ex1"))
        assert graded.report["score"] == 0.0, name
    for folder in (root, root / "class", root / "out"):
        assert not (folder / "report.yaml").exists() or "100" not in (folder / "report.yaml").read_text()


def test_patching_pytest_in_the_learner_process_changes_nothing(
        harness_class: tuple[Path, Callable[[str], Graded]]) -> None:
    """The checks run in the judge: the pytest a learner's file can patch is not the one that decides."""
    graded = harness_class[1]("patcher")
    assert graded.report is not None
    assert graded.exercise("ex1")["score"] == 20.0, graded.exercise("ex1")
    assert "tampering" not in graded.report["notes"]


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("grade", str(tmp_path / "nope.py"), "-o", str(tmp_path / "r.yaml"))
    assert proc.returncode == 2
    assert "submission not found" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_fail_under(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    folder = copy_solutions(tmp_path, "half", only=("ex1",))
    assert grade_forked(folder, "--fail-under", "50").code == 1
    assert grade_forked(folder, "--fail-under", "20").code == 0


def test_vietnamese_is_the_default_language(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    """``grader grade`` without ``--lang`` (the command's own default, read in this test process)."""
    folder = folder_with(tmp_path, "vi", {"ex1_device": "import torch\ndef pick_device():\n    return 'cuda'\n"})
    graded = grade_forked(folder, lang=None)
    assert graded.code == 0 and graded.report is not None, graded.stderr
    assert graded.report["lang"] == "vi"
    assert "phải trả về torch.device" in graded.check("ex1.pick_device_returns_device")["message"]


def test_endless_loop_at_top_level_is_stopped_and_the_rest_runs(tmp_path: Path,
                                                               grade_forked: Callable[..., Graded]) -> None:
    folder = copy_solutions(tmp_path, "slow_import", only=("ex1",))
    (folder / "ex3_roundtrip.py").write_text("while True:\n    pass\n\n" + solution_text("ex3"), encoding="utf-8")
    course = course_with(tmp_path, {"cell_timeout_s: 10": "cell_timeout_s: 2"})
    graded = grade_forked(folder, "--course", str(course))
    assert graded.exercise("ex1")["status"] == "passed"
    assert graded.exercise("ex3")["status"] == "passed"
    (stop,) = graded.report["top_level"]
    assert (stop["where"], stop["kind"]) == ("ex3_roundtrip.py, line 1", "timeout")
    assert "2 s" in stop["message"]


ENDLESS_TIMING = '''
import signal
import torch

SMALL_N_ANSWER = "B"

def time_matmul(n, device, repeats=5):
    {block}
    while True:
        pass

def speedup(n, device, repeats=3):
    return time_matmul(n, torch.device("cpu")) / time_matmul(n, device)
'''


@pytest.mark.parametrize("block", ["pass", "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})"],
                         ids=["python-loop", "alarm-blocked"])
def test_a_hang_costs_one_check_timeout_per_function(tmp_path: Path, grade_forked: Callable[..., Graded],
                                                      block: str) -> None:
    """The first check that calls time_matmul waits for its limit (pytest-timeout, or the parent's kill
    when the learner blocked the alarm); every later check that needs it is charged at once, also
    speedup()'s, whose own code calls the hung time_matmul: one wait in all, not two (issue 24)."""
    folder = folder_with(tmp_path, "hangs", {"ex2_timing": ENDLESS_TIMING.replace("{block}", block)})
    course = course_with(tmp_path, {"check_timeout_s: 30": "check_timeout_s: 2"})
    graded = grade_forked(folder, "--course", str(course))
    checks = {c["id"]: c for c in graded.exercise("ex2")["checks"]}
    assert checks.pop("ex2.small_n_answer")["status"] == "passed"
    assert {c["status"] for c in checks.values()} == {"timeout"}
    waited = [c for c in checks.values() if "already ran past" not in c["message"]]
    assert [c["id"] for c in waited] == ["ex2.time_matmul_returns_seconds"], waited
    charged = [c for c in checks.values() if "already ran past" in c["message"]]
    assert len(charged) == len(checks) - 1 and all("`time_matmul`" in c["message"] for c in charged)
    assert "ex2.speedup_consistent" in {c["id"] for c in charged}


FORKS_AT_ONCE = '''
import os
import sys

# A top level that forks before anything else (as a DataLoader's workers or multiprocessing do); the
# child imports torch._dynamo, which the learner process has deferred (grader/learner/deferred.py),
# and uses it. The cell raises, and is recorded, unless the child could.
pid = os.fork()
if pid == 0:
    import torch._dynamo
    torch._dynamo.reset()
    os._exit(0)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
'''


def test_a_fork_whose_child_imports_dynamo_does_not_hang(tmp_path: Path, grade: Callable[..., Graded]) -> None:
    """A fork in the learner's top level, whose child imports the deferred torch._dynamo, neither hangs
    nor breaks the parent's training. (When torch._dynamo was imported ahead on a thread beside the
    learner's code, a child forked while the thread held an import lock waited for it forever, and this
    cell ran past any limit.) The cell gets 120 s, which only a deadlock outlasts."""
    folder = copy_solutions(tmp_path, "forks")
    ex1 = folder / "ex1_device.py"
    ex1.write_text(FORKS_AT_ONCE + ex1.read_text(encoding="utf-8"), encoding="utf-8")
    course = course_with(tmp_path, {"cell_timeout_s: 10": "cell_timeout_s: 120"})
    graded = grade(folder, "--isolation", "none", "--course", str(course))
    assert graded.report is not None, graded.stderr[-2000:]
    assert graded.report["top_level"] == [], graded.report["top_level"]
    assert graded.report["score"] == 100.0


def test_the_learners_imports_never_race_the_grader(grade: Callable[..., Graded]) -> None:
    """PyTorch's Reproducibility idiom imports torch.utils.data at its top level. While torch._dynamo
    was imported on a thread beside the learner's code, that was a concurrent circular import: the
    import system gave one side a partially initialized torch._dynamo, and every optimizer step after
    it raised AttributeError (ex4's back-off and all of ex5: 70 of 100, in every exec'd grading;
    benchmarks/busy_machine.py found it). Nothing of the grader imports beside the learner's code now
    (torch._dynamo is deferred until the learner's code uses it: grader/learner/deferred.py)."""
    graded = grade(ROOT / "tests" / "submissions" / "idioms" / "correct" / "pytorch_reproducibility")
    assert graded.report is not None, graded.stderr[-2000:]
    assert graded.report["score"] == 100.0, [(c, graded.check(c)["message"]) for ex in ("ex4", "ex5")
                                             for c in graded.lost(ex)]


# The judge's own pytest options on the real checks, in a Python of their own (as the judge's, without
# the plugins installed packages announce): which plugins the session registered, and what it collected.
JUDGE_SESSION = r"""
import json, os, sys
import pytest
from grader.judge.session import session_args
from grader.paths import CHECKS_DIR

class Probe:
    def pytest_configure(self, config):
        self.names = sorted(name for name, plugin in config.pluginmanager.list_name_plugin() if plugin is not None)

    def pytest_collection_finish(self, session):
        self.items = len(session.items)

probe = Probe()
out, sys.stdout = sys.stdout, open(os.devnull, "w")
code = pytest.main([*session_args(), "--collect-only", str(CHECKS_DIR)], plugins=[probe])
sys.stdout = out
print(json.dumps({"code": int(code), "names": probe.names, "items": probe.items}))
"""


def test_the_judges_pytest_leaves_out_the_plugins_it_never_uses() -> None:
    """grader/judge/session.py ``NOT_LOADED``: none of those plugins is registered in a session run with
    the judge's options — a misspelt name would leave its plugin in (so did an option that the docs
    described and the code lacked: every check added and removed logging's handlers three times) —
    while every plugin a check needs is, and the checks collect."""
    from _pytest.config import default_plugins

    from grader.judge.session import NOT_LOADED

    assert set(NOT_LOADED) <= set(default_plugins), set(NOT_LOADED) - set(default_plugins)  # none misspelt
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-c", JUDGE_SESSION], capture_output=True, text=True, timeout=300,
                          env=env, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["code"] == 0 and found["items"] >= 35, found
    names = set(found["names"])
    assert not names & {*NOT_LOADED, *(f"pytest_{name}" for name in NOT_LOADED)}, names
    assert not names & {"logging", "threadexception", "unraisableexception", "setuponly", "doctest"}, names
    assert {"python", "runner", "fixtures", "skipping", "capture", "assertion", "warnings", "terminal",
            "pytest_timeout"} <= names, names


OUTCOMES = r"""
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("its setup broke")


def test_passes():
    pass


def test_raises():
    raise ValueError("a wrong answer")


def test_asserts():
    assert 1 == 2


def test_fails_in_its_setup(broken):
    pass


def test_fails_with_words_only():
    pytest.fail("said so", pytrace=False)


def test_skips():
    pytest.skip("not on this machine")


@pytest.mark.xfail(reason="known")
def test_fails_as_expected():
    raise ValueError("known")
"""
REPORTS_SESSION = r"""
import json, sys
import _pytest.nodes, pytest
from grader.judge.plugin import PlainReports

formatted = []
format_failure = _pytest.nodes.Node._repr_failure_py


def recorded(self, excinfo, style=None):
    formatted.append(self.name)
    return format_failure(self, excinfo, style)


_pytest.nodes.Node._repr_failure_py = recorded


class Seen:
    reports = []

    def pytest_runtest_logreport(self, report):
        Seen.reports.append([report.nodeid.split("::")[-1], report.when, report.outcome, hasattr(report, "wasxfail")])


plugins = [Seen(), *([PlainReports()] if sys.argv[2] == "plain" else [])]
code = pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[1]], plugins=plugins)
print(json.dumps({"code": int(code), "reports": Seen.reports, "formatted": formatted}))
"""


def test_the_judge_s_reports_of_failed_checks_are_pytest_s_without_their_tracebacks(tmp_path: Path) -> None:
    """grader/judge/plugin.py ``PlainReports``: every outcome pytest gives — passed, failed in the check or in
    its setup, failed with words only, skipped, an expected failure — is the outcome the judge's pytest
    reports, and no failure's traceback is formatted (pytest's own reports format one for each failure,
    which this session shows: ``formatted``)."""
    (tmp_path / "test_outcomes.py").write_text(OUTCOMES, encoding="utf-8")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

    def session(reports: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", REPORTS_SESSION, str(tmp_path / "test_outcomes.py"), reports],
                              capture_output=True, text=True, timeout=300, env=env, check=False, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))

    pytests, plain = session("pytest's"), session("plain")
    assert plain["reports"] == pytests["reports"] and plain["code"] == pytests["code"] == 1, (plain, pytests)
    outcomes = {(name, when): outcome for name, when, outcome, _ in plain["reports"] if outcome != "passed"}
    assert outcomes == {("test_raises", "call"): "failed", ("test_asserts", "call"): "failed",
                        ("test_fails_in_its_setup", "setup"): "failed",
                        ("test_fails_with_words_only", "call"): "failed",
                        ("test_skips", "call"): "skipped", ("test_fails_as_expected", "call"): "skipped"}, outcomes
    assert sorted(pytests["formatted"]) == ["test_asserts", "test_fails_as_expected", "test_fails_in_its_setup",
                                            "test_fails_with_words_only", "test_raises"]
    assert plain["formatted"] == []


ONE_CHECK = PlannedCheck("ex1.pick_device_returns_device",
                         "ex1_device/test_pick_device_returns_device.py::test_pick_device_returns_device", 5.0)


def _exec_judge(package: Path, plan: Plan, channel_w: int, judge_end: socket.socket) -> subprocess.Popen[bytes]:
    """``python -m grader.judge`` as the grader execs it, from a copy of the package, its Plan on stdin."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    judge = subprocess.Popen([sys.executable, "-m", "grader.judge"], stdin=subprocess.PIPE, cwd=package.parent,
                             pass_fds=(channel_w, judge_end.fileno()),
                             env={**env, "PYTHONPATH": str(package.parent), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert judge.stdin is not None
    judge.stdin.write(encode(plan) + b"\n")
    judge.stdin.close()
    return judge


def _grader_copy(tmp_path: Path, conftest_extra: str = "") -> Path:
    package = tmp_path / "copy" / "grader"
    shutil.copytree(ROOT / "grader", package, ignore=shutil.ignore_patterns("__pycache__"))
    conftest = package / "checks" / "conftest.py"
    conftest.write_text(conftest.read_text(encoding="utf-8") + conftest_extra, encoding="utf-8")
    return package


def test_the_judge_sends_start_and_collects_its_checks_before_it_waits_for_anything(tmp_path: Path) -> None:
    """grader/judge/__main__.py sends the learner process its Start before its own imports (pytest,
    torch, the checks: seconds) and before the learner process's Hello, so the learner's top level
    runs beside those imports; and an exec'd judge collects its plan's checks before it waits for the
    Hello (``judge_collecting``), so that pytest's start too runs beside the learner process's imports
    (before, it came after the Hello: the last step before a grading's first check). Here no Hello ever
    comes: the Start arrives all the same, and the checks' collection ends (a hook of the copy's conftest
    writes what it collected) while the judge still waits."""
    collected = tmp_path / "collected.txt"
    package = _grader_copy(tmp_path, "\n\ndef pytest_collection_finish(session):\n"
                                     f"    open({str(collected)!r}, 'w').write(str(len(session.items)))\n")
    learner_end, judge_end = socket.socketpair()
    channel_r, channel_w = os.pipe()
    start = Start({}, str(tmp_path), 1.0, 1.0)
    plan = Plan((ONE_CHECK,), start, "cpu", channel_w, judge_end.fileno(), "00" * 32)
    judge = _exec_judge(package, plan, channel_w, judge_end)
    try:
        seq, received = Connection(learner_end.fileno()).receive_numbered(Start, deadline=time.monotonic() + 120)
        assert (seq, received) == (START_SEQ, start)
        deadline = time.monotonic() + 120
        while not collected.exists() and judge.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert collected.read_text() == "2"  # the planned check and the canary
        assert judge.poll() is None  # waiting for the Hello that never comes
    finally:
        judge.kill()
        judge.wait()
        for fd in (channel_r, channel_w):
            os.close(fd)
        learner_end.close()
        judge_end.close()


def test_an_exec_d_judge_whose_checks_do_not_collect_says_so_once_the_learner_process_is_up(
        tmp_path: Path) -> None:
    """``judge_collecting``'s other way: a check that does not import fails the collection made before
    the Hello; the judge then waits for the Hello as before, collects again under pytest's own run, and
    reports the grader's failure (``checks_not_loaded``, naming what did not import) — never a verdict on the
    learner."""
    package = _grader_copy(tmp_path)
    check = package / "checks" / ONE_CHECK.nodeid.split("::")[0]
    check.write_text(check.read_text(encoding="utf-8") + "\nimport no_such_module_anywhere\n", encoding="utf-8")
    learner_end, judge_end = socket.socketpair()
    channel_r, channel_w = os.pipe()
    plan = Plan((ONE_CHECK,), Start({}, str(tmp_path), 1.0, 1.0), "cpu", channel_w, judge_end.fileno(), "00" * 32)
    judge = _exec_judge(package, plan, channel_w, judge_end)
    os.close(channel_w)
    judge_end.close()
    try:
        learner = Connection(learner_end.fileno())
        learner.receive_numbered(Start, deadline=time.monotonic() + 120)
        learner.send(Hello(torch="2.0", cuda=None, mps=False, cpu_name="cpu"))
        with os.fdopen(channel_r, "rb") as channel:
            messages = [parse(bytes.fromhex("00" * 32), line) for line in channel]
        assert judge.wait(timeout=120) == 0
    finally:
        judge.kill()
        judge.wait()
        learner_end.close()
    broken = [m for m in messages if isinstance(m, GraderBroken)]
    assert [m.kind for m in broken] == ["checks_not_loaded"] and "no_such_module_anywhere" in broken[0].error, messages
    assert isinstance(messages[-1], Done) and not any(isinstance(m, CheckEnded) for m in messages), messages
