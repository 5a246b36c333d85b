"""Run the grader for real: the ``grader`` CLI in a subprocess, on files in tmp_path."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.commands.cli import main
from grader.run.isolation import Isolation, probe
from grader.run.launch import ExecLauncher, ForkLauncher, Launcher, compile_package
from grader.run.share import Share, lanes_here, machine_share, usable_cores
from grader.wire.messages import RequestedDevice
from tests import roster_class as canvas_class
from tests.notebooks.catalog import CASES as NOTEBOOKS
from tests.submissions.catalog import CORRECT_STYLES, MODULES, ROOT, mistakes

SOLUTIONS = ROOT / "solutions"
STUBS = ROOT / "exercises"


@dataclass(frozen=True)
class Graded:
    code: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None

    def exercise(self, ex_id: str) -> dict[str, Any]:
        assert self.report is not None, self.stderr
        return self.report["exercises"][ex_id]  # type: ignore[no-any-return]

    def check(self, check_id: str) -> dict[str, Any]:
        for check in self.exercise(check_id.split(".", maxsplit=1)[0])["checks"]:
            if check["id"] == check_id:
                return check  # type: ignore[no-any-return]
        raise KeyError(check_id)

    def lost(self, ex_id: str) -> set[str]:
        return {c["id"] for c in self.exercise(ex_id)["checks"] if c["status"] != "passed"}


def suite_share() -> Share:
    """What each grading of this test process gets of the machine: the xdist workers' gradings run
    side by side, so each gets its part of the cores, as ``grader batch --workers N`` gives each of its
    gradings (grader/run/share.py). With a thread per core, two `grader grade solutions` side by side
    on 2 cores took 27-36 busy CPU-s; with their part, 12.5-15.7."""
    return machine_share(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), os.environ)


SHARE = suite_share()


def _threads(share: Share) -> int:
    """The threads a process of ``share`` runs its torch on."""
    return int(share.env.get("OMP_NUM_THREADS", "0")) or usable_cores()


@pytest.fixture(scope="session", autouse=True)
def _torch_on_its_share() -> None:
    """This test process's own torch too (the stand-in, conformance and reference tests run in it): with a
    thread per core, each xdist worker's OpenMP threads spin-waited on the cores the other worker and the
    gradings needed. Measured on the 2-core machine, `pytest -n 2` over test_standin, conformance and
    test_reference: 38.2 s wall and 52.8 user CPU-s with two threads a worker, 28.9 and 35.9 with one.
    (A fixture, not at import: xdist's controller loads this file too, and runs no test to import torch for.)"""
    import torch  # noqa: PLC0415 - where tests run only

    torch.set_num_threads(_threads(SHARE))


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 600,
            env: dict[str, str] | None = None, one_core: bool = False) -> subprocess.CompletedProcess[str]:
    """``grader ARGS`` in a subprocess, its gradings with this test process's part of the cores (``SHARE``);
    ``one_core``: the command may run on one core only (as `taskset -c`, a Slurm task or a small container
    sets it), where ``grader grade`` runs no lanes and execs its first run (grader/run/share.py ``lanes_here``)."""
    env = {**os.environ, **SHARE.env, "PYTHONPATH": str(ROOT), **(env or {})}
    # util-linux's taskset (Debian's essential set), not a preexec_fn: this process has threads.
    pinned = ["taskset", "-c", str(min(os.sched_getaffinity(0)))] if one_core else []
    return subprocess.run([*pinned, sys.executable, "-m", "grader", *args], capture_output=True, text=True,
                          check=False, cwd=cwd or ROOT, env=env, timeout=timeout)


@pytest.fixture(autouse=True)
def _argv_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A learner module run in this process sets ``sys.argv`` as its own machine would (grader/learner/toplevel.py
    ``script_argv``): the test process's own is put back after each test."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))


@pytest.fixture
def grade(tmp_path: Path) -> Callable[..., Graded]:
    def run(submission: Path, *extra: str, env: dict[str, str] | None = None) -> Graded:
        out = tmp_path / "reports" / f"{submission.stem}-{len(list(tmp_path.glob('reports/*')))}.yaml"
        proc = run_cli("grade", str(submission), "-o", str(out), "--lang", "en", *extra, env=env)
        report = yaml.safe_load(out.read_text(encoding="utf-8")) if out.exists() else None
        return Graded(proc.returncode, proc.stdout, proc.stderr, report)

    return run


class ForkLaunchers:
    """Fork servers for the in-process commands of this test process (grader/run/launch.py
    ``Launchers``): one pooled ``ForkLauncher`` per isolation, what ``grader batch`` grades with, left
    running when a command ends. For tests about what a grading or a batch says rather than how its
    processes start (tests/test_launch.py shows forked and exec'd ones grade alike), each grading then
    costs its checks, not two Pythons importing torch, and each batch not two servers' start. Every
    process gets this test process's part of the cores (``SHARE``), a batch's ``--workers`` share too
    (tests/test_batch.py's workers test runs the command line); ``--no-fork-server`` still execs."""

    def __init__(self) -> None:
        self._launchers: dict[tuple[Isolation, tuple[tuple[str, str], ...], float], ForkLauncher] = {}

    def lanes(self, device: RequestedDevice, isolation: Isolation) -> int:
        """As the command line decides (``lanes_here``): the suite's in-process gradings run in lanes wherever
        a `grader grade` would, so that every catalog graded here (the mistakes, the correct styles, the
        notebooks) shows lanes give its verdicts. One lane where this worker's share is one core was tried and
        was not faster (the suite 6:23-7:21 with lanes, 6:42-7:01 without; docs/performance.md, tenth session)."""
        return lanes_here(device, isolation.learners_fork)

    def grading(self, isolation: Isolation, lanes: int) -> contextlib.AbstractContextManager[Launcher]:
        return contextlib.nullcontext(self.launcher(isolation))

    def batch(self, fork: bool, share: Share, isolation: Isolation) -> contextlib.AbstractContextManager[Launcher]:
        """A batch's gradings get the narrower of this process's share and the batch's own per-worker share:
        run alone (``pytest tests/test_mistakes.py``, no xdist), this process's share is every core, and a
        class on two workers each given every core ran 2.5-4 times slower than ``grader batch`` (OpenMP's
        threads spinning past the cores)."""
        narrower = share if _threads(share) < _threads(SHARE) else SHARE
        return contextlib.nullcontext(self.launcher(isolation, narrower) if fork else ExecLauncher(share, isolation))

    def launcher(self, isolation: Isolation, share: Share = SHARE) -> Launcher:
        key = (isolation, tuple(sorted(share.env.items())), share.gpu)
        if key not in self._launchers:
            self._launchers[key] = ForkLauncher(share, isolation)
        return self._launchers[key]

    def close(self) -> None:
        for launcher in self._launchers.values():
            launcher.close()


@pytest.fixture(scope="session")
def fork_launchers() -> Iterator[ForkLaunchers]:
    launchers = ForkLaunchers()
    try:
        yield launchers
    finally:
        launchers.close()


@pytest.fixture(scope="session")
def fork_launcher(fork_launchers: ForkLaunchers) -> Launcher:
    """The session's fork servers for this machine's own isolation (``grade_public(launcher=)``)."""
    return fork_launchers.launcher(probe())


def in_process(argv: list[str], launchers: ForkLaunchers) -> tuple[int, str, str]:
    """``grader ARGV`` run by ``main`` in this test process: exit code, stdout, stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv, launchers=launchers)
        except SystemExit as exc:  # argparse's usage error
            code = exc.code if isinstance(exc.code, int) else 2
    return code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture
def grade_forked(tmp_path: Path, fork_launchers: ForkLaunchers) -> Callable[..., Graded]:
    """``grader grade`` as ``grade`` runs it, but in this test process, its judge and learner process
    forked from the session's warm servers (``main(launchers=)``). For tests about what a grading
    says; a test about how ``grader grade``'s own processes start, are contained or can be attacked
    uses ``grade`` (a subprocess, exec'd processes). ``lang=None``: the course's own language."""
    def run(submission: Path, *extra: str, lang: str | None = "en") -> Graded:
        out = tmp_path / "reports" / f"{len(list(tmp_path.glob('reports/*')))}.yaml"  # any submission name fits
        code, stdout, stderr = in_process(
            ["grade", str(submission), "-o", str(out), *(("--lang", lang) if lang else ()), *extra], fork_launchers)
        report = yaml.safe_load(out.read_text(encoding="utf-8")) if out.exists() else None
        return Graded(code, stdout, stderr, report)

    return run


@dataclass(frozen=True)
class Batched:
    """What ``batch_forked`` ran, read as a ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def batch_forked(fork_launchers: ForkLaunchers) -> Callable[..., Batched]:
    """``grader batch ARGS`` in this test process, its learners' processes forked from the session's
    warm servers (``main(launchers=)``): for tests about what a batch writes. A test about the
    command itself (its exit on Ctrl-C, its workers' share of the machine) runs it with ``run_cli``."""
    def run(*args: str) -> Batched:
        return Batched(*in_process(["batch", *args], fork_launchers))

    return run


def _batch_of_one(submission: Path, out: Path, extra: tuple[str, ...]) -> list[str]:
    return ["batch", str(submission.parent), "-o", str(out), "--lang", "en", "--workers", "1", *extra]


def _report_of(out: Path, submission: Path) -> dict[str, Any] | None:
    path = out / f"{submission.name}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None


@pytest.fixture
def batch_one(tmp_path: Path, fork_launchers: ForkLaunchers) -> Callable[..., Graded]:
    """``grader batch`` on a class of one, in this test process: its children are forked from the
    session's warm servers (``--no-fork-server``: exec'd), each in its sandbox as in any batch."""
    def run(submission: Path, *extra: str) -> Graded:
        out = tmp_path / "batch-reports"
        code, stdout, stderr = in_process(_batch_of_one(submission, out, extra), fork_launchers)
        return Graded(code, stdout, stderr, _report_of(out, submission))

    return run


@pytest.fixture
def batch_one_fresh(tmp_path: Path) -> Callable[..., Graded]:
    """``grader batch`` on a class of one in a subprocess, with fork servers of its own: for a test
    about what its servers imported, or one whose learner kills the server it was forked from."""
    def run(submission: Path, *extra: str) -> Graded:
        out = tmp_path / "batch-reports"
        proc = run_cli(*_batch_of_one(submission, out, extra))
        return Graded(proc.returncode, proc.stdout, proc.stderr, _report_of(out, submission))

    return run


def folder_with(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    """A submission folder in tmp_path holding the given exercise files (module -> text)."""
    folder = tmp_path / name
    folder.mkdir(parents=True)
    for module, text in files.items():
        (folder / f"{module}.py").write_text(text, encoding="utf-8")
    return folder


TONE_MARKS = "\u0300\u0301\u0303\u0309\u0323"  # grave, acute, tilde, hook above, dot below


def windows_1258(text: str) -> bytes:
    """Vietnamese as Windows writes it in code page 1258: the letters it has (â, ơ, đ ...), tone marks
    combined after them (ậ: â and a combining dot below)."""
    out = b""
    for char in text:
        try:
            out += char.encode("cp1258")
        except UnicodeEncodeError:
            parts = unicodedata.normalize("NFD", char)
            tones = "".join(mark for mark in parts if mark in TONE_MARKS)
            letter = unicodedata.normalize("NFC", "".join(mark for mark in parts if mark not in TONE_MARKS))
            out += (letter + tones).encode("cp1258")
    return out


def copy_solutions(tmp_path: Path, name: str, *, only: tuple[str, ...] | None = None) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    for ex_id, module in MODULES.items():
        if only is None or ex_id in only:
            shutil.copy(SOLUTIONS / f"{module}.py", folder / f"{module}.py")
    return folder


def survivors(marker: str) -> list[str]:
    """Processes on this machine whose command line carries ``marker`` (a sandbox's are visible here)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in text:
            found.append(text.replace("\0", " "))
    return found


def solution_text(ex_id: str) -> str:
    return (SOLUTIONS / f"{MODULES[ex_id]}.py").read_text(encoding="utf-8")


def course_with(tmp_path: Path, replacements: dict[str, str]) -> Path:
    """A copy of course.yaml in tmp_path with some lines changed (limits, timeouts)."""
    text = (ROOT / "course.yaml").read_text(encoding="utf-8")
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    for name in ("exercises", "solutions"):
        link = tmp_path / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    course = tmp_path / "course.yaml"
    course.write_text(text, encoding="utf-8")
    return course


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def built_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
               build: Callable[[Path], None]) -> Path:
    """``build(folder)`` run once for the whole test run, by the first xdist worker to get here; the
    others wait for it and share its folder (what a grading of many submissions must do)."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    folder = shared / name
    with _locked(shared / f"{name}.lock"):
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


# The fixtures that grade a whole class once for many tests (a session or a module's): the first test
# to ask builds it in its own setup, and a second xdist worker asking meanwhile waits for it. Under
# load (two gradings beside the suite, load 16 on 2 cores) the notebooks' batch took 222 s and the
# catalog's more, past the 300 s that pyproject.toml gives a test to catch a hang: such a test gets
# the bound its batch has (CLASS_TIMEOUT_S). A bound, never a measure of speed.
CLASS_FIXTURES = frozenset({"graded_class", "roster_class", "harness_class"})
CLASS_TIMEOUT_S = 1800


def pytest_configure(config: pytest.Config) -> None:
    """The grader's bytecode written once, by the run's first process (xdist's controller, or the only one),
    before any test starts a grader: the suite's ~470 exec'd Pythons each import the grader. The grader
    writes it itself (grader/run/launch.py ``compile_ahead``, with the same ``compile_package``), but not
    where its own Python may not write bytecode — and a fresh clone run from a shell with
    ``PYTHONDONTWRITEBYTECODE`` (this project's machine; many CI images and Dockerfiles set it) then
    compiled the grader in memory in every one of them: +0.3 CPU-s a `grader grade`, 20-30 s of the
    suite's wall (docs/performance.md, twentieth session). An install compiles a package whatever that
    variable says (pip does); the suite does the same for the checkout's own package, in its
    ``__pycache__`` (git-ignored). Nothing else changes: the processes read bytecode as they would from
    any install."""
    if not hasattr(config, "workerinput"):
        compile_package()


def pytest_itemcollected(item: pytest.Item) -> None:
    if CLASS_FIXTURES & set(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.timeout(CLASS_TIMEOUT_S))


# The test modules that take longest, longest first: test-seconds of one run of the suite on the 2-core machine
# (benchmarks/suite_cost.py, 2026-12-05). pyproject.toml runs xdist with --no-loadscope-reorder, so that it hands
# whole modules to its workers in this order. Its default order, most tests first, handed out the modules of few but
# long tests last — test_gradescope_package (6 tests, a minute: a venv built by setup.sh), test_slurm (2, 15 s),
# test_deferred (3, 22 s) — and one worker then ran on alone while the other core idled. A module not named here
# runs after these, in the order collected; a stale entry costs seconds, never a result.
LONGEST_FIRST = (
    "tests/test_hostile.py", "tests/test_mistakes.py", "tests/test_gradescope_package.py",
    "tests/test_hostile_bytes.py", "tests/test_harness.py", "tests/test_batch.py", "tests/test_environment.py",
    "tests/test_notebook_catalog.py", "tests/test_selfcheck.py", "tests/test_isolation.py", "tests/test_launch.py",
    "tests/test_deferred.py", "tests/test_toplevel.py", "tests/test_forgery_measurements.py", "tests/test_forgery.py",
    "tests/test_standin.py", "tests/test_hostile_names.py", "tests/test_slurm.py", "tests/test_examples.py",
    "tests/conformance/test_conformance.py", "tests/test_hostile_outputs.py", "tests/test_release.py",
    "tests/test_notebooks.py", "tests/test_earlier_trainings.py", "tests/test_grade_correct.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of ``LONGEST_FIRST`` first, in its order; each module's tests stay in their own order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


@pytest.fixture(autouse=True)
def _no_torch_mode_left_on_the_stack() -> Iterator[None]:
    """A test that leaves a PyTorch mode on this thread's stack (a TorchFunctionMode or a TorchDispatchMode
    it entered in this process and never left) fails itself, and the modes are taken off: a later test in
    the same xdist worker would otherwise run under them. A cell's alarm cut inside the grader's push of its
    own mode once left one behind, and a test minutes later, in another module, failed for it."""
    torch = sys.modules.get("torch")
    depths = _mode_depths(torch) if torch is not None else (0, 0)
    yield
    torch = sys.modules.get("torch")
    if torch is None:
        return
    from torch.utils._python_dispatch import _pop_mode as pop_dispatch

    left: list[str] = []
    while torch._C._len_torch_function_stack() > depths[0]:
        left.append(type(torch.overrides._pop_mode()).__qualname__)
    while _mode_depths(torch)[1] > depths[1]:
        left.append(type(pop_dispatch()).__qualname__)
    assert not left, f"the test left PyTorch modes on the stack: {left}"


def _mode_depths(torch: Any) -> tuple[int, int]:
    from torch.utils._python_dispatch import _len_torch_dispatch_stack

    return torch._C._len_torch_function_stack(), _len_torch_dispatch_stack()


def class_learners() -> dict[str, Path]:
    """Learner name -> submission, for every known submission: the correct styles (a folder), the
    one-mistake files (a folder holding that exercise's file) and the notebook catalog (a file)."""
    learners: dict[str, Path] = {f"correct__{name.replace('/', '__')}": path for name, path in CORRECT_STYLES.items()}
    learners |= {f"mistake__{m.name.replace('/', '__')}": m.path for m in mistakes()}
    learners |= {f"notebook__{case.path.stem}__{case.path.suffix[1:]}": case.path for case in NOTEBOOKS}
    return learners


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory: pytest.TempPathFactory, worker_id: str,
                 fork_launchers: ForkLaunchers) -> Callable[[str], Graded]:
    """Every known submission graded once for the whole test run, as an instructor grades a class:
    ``grader batch --workers 2`` (in-process, each sandbox forked from the session's warm servers). The
    first xdist worker to get here grades; the others wait for its reports. Returns learner name -> its report."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    out = shared / "class-reports"
    with _locked(shared / "class.lock"):
        if not (out / "gradebook.csv").exists():
            cls = shared / "class"
            for name, path in class_learners().items():
                if path.is_dir():
                    shutil.copytree(path, cls / name)
                elif path.parent.name in MODULES.values():  # a mistake: its exercise's file in a folder
                    (cls / name).mkdir(parents=True)
                    shutil.copy(path, cls / name / f"{path.parent.name}.py")
                else:
                    cls.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, cls / f"{name}{path.suffix}")
            code, _, stderr = in_process(["batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en",
                                           "--quiet"], fork_launchers)
            assert code == 0, stderr
            assert "Traceback" not in stderr  # what the notebooks' own batch asserted before it read this one

    def report(name: str) -> Graded:
        path = out / f"{name}.yaml"
        return Graded(0, "", "", yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None)

    return report


@pytest.fixture(scope="session")
def roster_class(tmp_path_factory: pytest.TempPathFactory, worker_id: str,
                 fork_launchers: ForkLaunchers) -> canvas_class.RosterClass:
    """The Canvas class of tests/roster_class.py graded once for the whole test run, as its instructor
    would: ``grader batch SUBMISSIONS -o OUT --roster roster.csv --workers 2`` (the course's language,
    Vietnamese; in-process, from the session's warm servers). The first xdist worker to get here
    grades; the others wait for its gradebook."""
    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    root = shared / "roster-class"
    out = root / "grades"
    with _locked(shared / "roster-class.lock"):
        if not (out / "gradebook.csv").exists():
            shutil.rmtree(root, ignore_errors=True)
            submissions, roster = canvas_class.build(root)
            code, _, stderr = in_process(["batch", str(submissions), "-o", str(out), "--roster", str(roster),
                                           "--workers", "2", "--quiet"], fork_launchers)
            assert code == 0, stderr
    return canvas_class.RosterClass(root / "submissions", root / "roster.csv", out)
