"""How a run's processes start (grader/run/launch.py): chosen by the caller, never by module state,
and grading never depends on the fork server.

Forked processes themselves are tested end to end in tests/test_hostile.py (``batch``)."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grader.course import load_course
from grader.grading import grade
from grader.run import launch, reaper
from grader.run.isolation import PASSED_ENV, Isolation, probe
from grader.run.sandbox import LEARNER_EXIT_WAIT_S, base_env
from grader.run.share import THREAD_VARS, WHOLE, learner_waits, machine_share
from grader.wire.codec import decode, encode
from grader.wire.messages import ForkRequest, Limits
from tests.conftest import ROOT, copy_solutions, course_with


def test_a_server_that_cannot_start_leaves_the_processes_to_exec(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    starts = []

    def broken(self: object, role: str, *args: object) -> None:
        starts.append(role)
        raise launch.ServerGone("cannot start")

    monkeypatch.setattr(launch.ForkServer, "__init__", broken)
    submission = copy_solutions(tmp_path, "ann", only=("ex1", "ex3"))
    with launch.ForkLauncher() as launcher:
        report = grade(submission, load_course(), device="cpu", lang="en", exercises=["ex1", "ex3"], launcher=launcher)
        again = grade(submission, load_course(), device="cpu", lang="en", exercises=["ex1"], launcher=launcher)
    assert [ex.status for ex in report.exercises if ex.id in ("ex1", "ex3")] == ["passed", "passed"]
    assert [ex.status for ex in again.exercises if ex.id == "ex1"] == ["passed"]
    assert sorted(starts) == ["judge", "learner"]  # tried once per role in this thread, then exec'd


def test_forked_and_execd_processes_grade_alike(tmp_path: Path) -> None:
    submission = copy_solutions(tmp_path, "ann", only=("ex2", "ex3"))
    with launch.ForkLauncher() as forked:
        by_fork = grade(submission, load_course(), device="cpu", lang="en", exercises=["ex2", "ex3"], launcher=forked)
    by_exec = grade(submission, load_course(), device="cpu", lang="en", exercises=["ex2", "ex3"],
                    launcher=launch.ExecLauncher())
    assert [(c.id, c.status) for ex in by_fork.exercises for c in ex.checks] == [
        (c.id, c.status) for ex in by_exec.exercises for c in ex.checks]
    assert by_fork.score == by_exec.score == 40.0


class _WaitsRecorded:
    """A run's child whose ``wait`` calls are recorded (the rest is the real child's)."""

    def __init__(self, inner: launch.Child) -> None:
        self.inner = inner
        self.timeouts: list[float | None] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def wait(self, timeout: float | None = None) -> int:
        self.timeouts.append(timeout)
        return self.inner.wait(timeout)


class _LearnersRecorded:
    """A launcher whose learner processes' waits are recorded."""

    def __init__(self, inner: launch.Launcher) -> None:
        self.inner, self.isolation = inner, inner.isolation
        self.learners: list[_WaitsRecorded] = []

    def prepare(self, spawn: launch.Spawn) -> None:
        self.inner.prepare(spawn)

    def start(self, spawn: launch.Spawn) -> launch.Child:
        child = self.inner.start(spawn)
        if spawn.role != "learner":
            return child
        self.learners.append(_WaitsRecorded(child))
        return self.learners[-1]  # type: ignore[return-value]


class _JudgeCannotStart(_LearnersRecorded):
    """A launcher whose judge process cannot be started (the machine out of processes), after the learner's was."""

    def start(self, spawn: launch.Spawn) -> launch.Child:
        if spawn.role == "judge":
            raise OSError(11, "Resource temporarily unavailable")
        return super().start(spawn)


def _runs_left(isolation: Isolation) -> list[str]:
    """The run cgroups this process made that are still there (none where there are no cgroups)."""
    mine = f"run-{os.getpid()}-"
    hierarchies = [Path(h) for h in {isolation.cgroups, isolation.memory_cgroups} if h]
    return sorted(p.name for h in hierarchies for p in h.iterdir() if p.name.startswith(mine))


@pytest.mark.parametrize("forked", [False, True], ids=["execd", "forked"])
def test_a_run_whose_judge_cannot_start_leaves_nothing_behind(tmp_path: Path, forked: bool) -> None:
    """grader/run/sandbox.py ``spawn``: the error reaches the caller (a batch makes it that learner's grader
    error row), and nothing of the run outlives it — the learner process already started is gone, and so
    is the run's cgroup (once, each such run left a cgroup, an open pipe and a learner process waiting)."""
    isolation = probe()
    before = _runs_left(isolation)
    submission = copy_solutions(tmp_path, "ann", only=("ex1",))
    with (launch.ForkLauncher(isolation=isolation) if forked
          else contextlib.nullcontext(launch.ExecLauncher(isolation=isolation))) as inner:
        launcher = _JudgeCannotStart(inner)
        with pytest.raises(OSError, match="temporarily unavailable"):
            grade(submission, load_course(), device="cpu", lang="en", exercises=["ex1"], launcher=launcher)
        [learner] = launcher.learners
        assert learner.poll() is not None, "the learner process outlived its run"
    assert _runs_left(isolation) == before


SWALLOWS_ITS_LIMIT = """
def time_matmul(n, device, repeats=5):
    while True:
        try:
            while True:
                pass
        except:  # noqa: E722 - its limit too: the learner process cannot stop the call
            pass
"""


def test_a_learner_process_the_judge_gave_up_on_is_ended_without_waiting_for_its_exit(
        tmp_path: Path, fork_launcher: launch.Launcher) -> None:
    """A call whose bare ``except`` swallows the learner process's own limit runs on past the check's time;
    the judge gives up on it at its backstop (``LearnerLost("stuck")``), and the grader ends that process at
    once: it waited LEARNER_EXIT_WAIT_S (5 s) for an exit that such a process never makes, a hang's grading
    38.8 s instead of 34 (benchmarks/targets.py, target 3, `grader grade`'s exec'd processes: the decision is
    grader/run/sandbox.py's, whatever started the process; here the session's fork servers, in this machine's
    sandbox, as a batch's). The next run's learner process, which ends when its judge is done, is still
    waited for (its exit status says how it ended). Red when the stuck one is waited for too."""
    ex2 = (ROOT / "solutions" / "ex2_timing.py").read_text(encoding="utf-8") + SWALLOWS_ITS_LIMIT
    submission = copy_solutions(tmp_path, "ann", only=())
    (submission / "ex2_timing.py").write_text(ex2, encoding="utf-8")
    course = load_course(course_with(tmp_path, {"check_timeout_s: 30": "check_timeout_s: 2"}))
    launcher = _LearnersRecorded(fork_launcher)
    report = grade(submission, course, device="cpu", lang="en", exercises=["ex2"], launcher=launcher)
    checks = {c.id: c for ex in report.exercises for c in ex.checks}
    timed = checks.pop("ex2.time_matmul_returns_seconds")
    assert timed.status == "timeout" and "ran past its time limit" in timed.message, timed
    assert checks.pop("ex2.small_n_answer").status == "passed"
    assert all(c.status == "timeout" and "already ran past" in c.message for c in checks.values()), checks
    stuck, *later = launcher.learners
    assert all(timeout is None for timeout in stuck.timeouts), stuck.timeouts  # killed, then reaped
    assert later and all(LEARNER_EXIT_WAIT_S in learner.timeouts for learner in later), \
        [learner.timeouts for learner in later]


def test_a_run_whose_cgroup_cannot_be_joined_leaves_no_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same where the run's cgroup was made but its ``cgroup.procs`` cannot be opened: no process starts,
    and the cgroup is removed."""
    from grader.run.cgroups import RunCgroup

    isolation = probe()
    if not isolation.cgroups:
        pytest.skip("no cgroups here (not root)")
    before = _runs_left(isolation)

    def refused(self: RunCgroup) -> tuple[int, ...]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(RunCgroup, "procs_fds", refused)
    launcher = _JudgeCannotStart(launch.ExecLauncher(isolation=isolation))
    with pytest.raises(OSError, match="Too many open files"):
        grade(copy_solutions(tmp_path, "ann", only=("ex1",)), load_course(), device="cpu", lang="en",
              exercises=["ex1"], launcher=launcher)
    assert launcher.learners == []
    assert _runs_left(isolation) == before


def test_one_server_forks_the_runs_of_every_worker_at_once_and_tells_each_its_own_end() -> None:
    """A batch's workers share one server a role (grader/spawn/forkserver.py ``serve``): two learner
    processes forked from it live at once; each learns its own exit (by pid), whichever ends first."""
    with launch.ForkLauncher() as launcher:
        children, peers = [], []
        for _ in range(2):
            ours, theirs = socket.socketpair()
            with theirs:
                children.append(launcher.start(launch.Spawn("learner", {}, "/", (theirs.fileno(),))))
            peers.append(ours)
        first, second = children
        assert len(launcher._servers) == 1 and first.pid != second.pid  # noqa: SLF001 - the pool itself is the subject
        [(role, server_pid)] = launcher.server_pids()  # what benchmarks/profile_grade.py reads the children's CPU of
        assert role == "learner" and launch._running(server_pid)  # noqa: SLF001
        assert reaper._parent(str(first.pid)) == reaper._parent(str(second.pid)) == server_pid  # noqa: SLF001
        for peer in peers:  # each says hello, then waits for its run's start
            assert peer.recv(1)
        os.kill(second.pid, signal.SIGKILL)  # the later one ends first
        while launch._running(second.pid):  # noqa: SLF001 - until it has ended
            time.sleep(0.05)
        assert first.poll() is None  # its neighbour's end is not its own
        peers[0].close()  # no run comes: it ends by itself
        while launch._running(first.pid):  # noqa: SLF001
            time.sleep(0.05)
        assert second.wait(timeout=30) == -signal.SIGKILL  # both ended before either asked
        assert first.wait(timeout=30) not in (None, -signal.SIGKILL)
        peers[1].close()
        for child in children:
            child.stdin.close()
            child.stdout.close()
    assert launcher.server_pids() == []  # closed


def test_servers_outlive_the_worker_threads_that_started_them(tmp_path: Path) -> None:
    """A batch's worker thread starts the servers and ends with the batch; the launcher's servers must
    stay for the next batch. An isolated learner server's bubblewrap dies with the *thread* that started
    it (--die-with-parent: the kernel's parent-death signal), so one started by a worker died with it,
    and the test suite's in-process batches each paid another server's start (torch's imports)."""
    isolation = probe()
    if not isolation.learners_fork:
        pytest.skip("no isolated fork server on this machine: nothing dies with its starting thread")
    submission = copy_solutions(tmp_path, "ann", only=("ex1",))
    with launch.ForkLauncher(WHOLE, isolation) as launcher:
        servers, scores = [], []

        def grade_ex1() -> None:
            scores.append(grade(submission, load_course(), device="cpu", lang="en", exercises=["ex1"],
                                launcher=launcher).score)

        for _ in range(2):
            worker = threading.Thread(target=grade_ex1)
            worker.start()
            worker.join()
            servers.append(sorted(launcher.server_pids()))
        assert scores == [20.0, 20.0]
        assert servers[0] == servers[1] and [role for role, _ in servers[0]] == ["judge", "learner"]


def test_a_learner_process_s_idle_threads_sleep_unless_the_user_chose() -> None:
    """OpenMP's default spin-wait kept a learner process's spare threads busy between its small ops
    (grader/run/share.py ``LEARNER_WAIT``); a policy the user set is theirs."""
    assert learner_waits({}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert learner_waits({"OMP_WAIT_POLICY": "ACTIVE"}) == {}
    assert "OMP_WAIT_POLICY" in PASSED_ENV  # through the sandbox too


def test_courses_of_two_file_sizes_share_the_judges_server_not_the_learners(monkeypatch: pytest.MonkeyPatch) -> None:
    """The work dir's size shapes an isolated learner server's sandbox, so each size has its own learner
    server; a judge's server is never isolated and serves both (a second one cost a Python importing torch)."""
    started: list[tuple[str, int]] = []

    class Recorded:
        def __init__(self, role: str, env: object, isolation: object, work_mb: int) -> None:
            started.append((role, work_mb))

        def alive(self) -> bool:
            return True

        def close(self) -> None:
            pass

    monkeypatch.setattr(launch, "ForkServer", Recorded)
    launcher = launch.ForkLauncher()
    for role in ("judge", "learner"):
        for size in (5, 256, 5):
            launcher.prepare(launch.Spawn(role, {}, "/", (), limits=Limits(file_size_mb=size)))
    assert started == [("judge", 5), ("learner", 5), ("learner", 256)]


def test_a_process_the_grader_waits_for_is_found_ended_by_the_kernel_not_by_polling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``Popen.wait(timeout)`` polls with sleeps that double up to 50 ms: ``grader grade`` waited 31-180 ms for
    its two servers to end. ``reaper.wait_exited`` sleeps on a pidfd instead, and calls ``Popen.wait`` only
    once the process has ended (no timeout: it reaps); where there is no pidfd it is ``Popen.wait(timeout)``."""
    waits: list[float | None] = []
    real_wait = subprocess.Popen.wait

    def recorded(self: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        waits.append(timeout)
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", recorded)

    def reading() -> subprocess.Popen[bytes]:  # ends with its stdin
        return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(len(sys.stdin.read()) + 3)"],
                                stdin=subprocess.PIPE)

    process = reading()
    with pytest.raises(subprocess.TimeoutExpired):
        reaper.wait_exited(process, 0.2)
    assert process.poll() is None and waits == []  # still running, never asked with a timeout
    assert process.stdin is not None
    process.stdin.close()
    assert reaper.wait_exited(process, 30) == 3
    assert waits == [None]
    assert reaper.wait_exited(process, 30) == 3 and waits == [None]  # reaped already: its code, nothing asked

    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    def no_poll(*args: object) -> object:
        raise OSError(22, "Invalid argument")

    for where, what, instead in ((os, "pidfd_open", no_pidfd), (select, "select", no_poll)):
        with monkeypatch.context() as patched:
            patched.setattr(where, what, instead)
            waits.clear()
            process = reading()
            assert process.stdin is not None
            process.stdin.close()
            assert reaper.wait_exited(process, 30) == 3
            assert waits == [30]


def test_a_launcher_tells_every_server_to_end_before_it_waits_for_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two servers told one after the other's end took both exits in a row (20-40 ms each, torch's pages
    unmapped by the kernel); told first, they end side by side."""
    calls: list[tuple[str, str]] = []

    class Recorded:
        def __init__(self, role: str, env: object, isolation: object, work_mb: int) -> None:
            self.role = role

        def alive(self) -> bool:
            return True

        def hang_up(self) -> None:
            calls.append(("hang_up", self.role))

        def close(self) -> None:
            calls.append(("close", self.role))

    monkeypatch.setattr(launch, "ForkServer", Recorded)
    with launch.ForkLauncher() as launcher:
        for role in ("judge", "learner"):
            launcher.prepare(launch.Spawn(role, {}, "/", ()))
    assert sorted(calls[:2]) == [("hang_up", "judge"), ("hang_up", "learner")]
    assert sorted(calls[2:]) == [("close", "judge"), ("close", "learner")]


def test_a_run_gets_the_judges_server_starting_before_it_waits_for_the_learners(tmp_path: Path) -> None:
    """A run asks its launcher to prepare the judge's process before it starts the learner's
    (grader/run/sandbox.py ``spawn``): a fork server's imports (seconds) then run beside the learner
    server's start, and the judge forked later comes from that same server."""
    calls: list[tuple[str, str, bool]] = []

    class Recording(launch.ForkLauncher):
        def prepare(self, spawn: launch.Spawn) -> None:
            super().prepare(spawn)
            calls.append(("prepare", spawn.role, any(k[0] == spawn.role for k in self._servers)))

        def start(self, spawn: launch.Spawn) -> launch.Child:
            calls.append(("start", spawn.role, any(k[0] == spawn.role for k in self._servers)))
            return super().start(spawn)

    submission = copy_solutions(tmp_path, "ann", only=("ex1",))
    with Recording() as launcher:
        report = grade(submission, load_course(), device="cpu", lang="en", exercises=["ex1"], launcher=launcher)
        servers = list(launcher._servers.values())  # noqa: SLF001 - the pool itself is the subject
    assert [ex.score for ex in report.exercises if ex.id == "ex1"] == [20.0]
    # prepared (a judge server exists), then the learner's start (its server started then), then the judge's
    assert calls == [("prepare", "judge", True), ("start", "learner", False), ("start", "judge", True)]
    assert sorted(server.role for server in servers) == ["judge", "learner"]


def test_no_process_module_keeps_a_switch_or_imports_another_in_a_cycle() -> None:
    """The launcher is passed in; the process modules import one way: sandbox -> launch, and the fork
    server imports neither."""
    names = ("run.sandbox", "run.launch", "spawn.forkserver", "judge.__main__", "judge.session", "judge.plugin",
             "run.blame")
    modules = {name: ROOT / "grader" / f"{name.replace('.', '/')}.py" for name in names}
    imports: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = {node.module.removeprefix("grader.") for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("grader.")}
        imports[name] = found & set(modules)
        assert not [node for node in tree.body if isinstance(node, ast.Global)], name
    for name, found in imports.items():
        for other in found:
            assert name not in imports.get(other, set()), f"{name} and {other} import each other"
    assert "spawn.forkserver" not in imports["run.sandbox"] and "run.sandbox" not in imports["run.launch"]


def test_a_batch_worker_s_gpu_share_reaches_its_learner_process_explicitly() -> None:
    """The share of the GPU's memory is a value carried to the learner process — its command line
    when exec'd, its fork request when forked — never an environment variable."""
    share = machine_share(2, {})
    assert share.gpu == 0.5 and share.env == {var: share.env["OMP_NUM_THREADS"] for var in THREAD_VARS}
    assert machine_share(2, {"OMP_NUM_THREADS": "7"}).env == {"MKL_NUM_THREADS": share.env["MKL_NUM_THREADS"]}
    assert machine_share(1, {}) == WHOLE and WHOLE.gpu == 1.0
    spawn = launch._shared(launch.Spawn("learner", {"A": "1"}, "/", (7,)), share)
    assert spawn.gpu_share == 0.5 and spawn.env == {"A": "1", **share.env}
    assert launch.argv(spawn, (7,))[-3:] == ["7", "auto", "0.5"]
    request = ForkRequest(dict(spawn.env), "/", spawn.device, spawn.limits, 0, spawn.gpu_share)
    assert decode(encode(request), ForkRequest) == request
    assert all("GPU" not in name for name in (*share.env, *PASSED_ENV))


AHEAD_THEN_FORK = """
import os, sys, torch
torch.set_num_threads(2)  # as a judge server on a machine with cores to spare
from grader.checks.ex4_oom.workload import budget_forcing_backoff
from grader.spawn.forkserver import PRELOAD, PRELOAD_IF_INSTALLED, _imported_forkable
assert _imported_forkable(PRELOAD["judge"], PRELOAD_IF_INSTALLED["judge"], checks=True)  # as the judge's server starts
print("computed", budget_forcing_backoff.cache_info().currsize, "threads", torch.get_num_threads())
pid = os.fork()
if pid == 0:  # a forked judge: its own products on two threads
    a = torch.randn(1024, 1024)
    (a @ a).sum()
    torch.relu(torch.randn(4_000_000)).sum()
    os._exit(0)
print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_judge_server_computes_what_every_grading_shares_and_its_children_still_compute() -> None:
    """The judge's server computes ex4's budget once, before it forks (grader/judge/ahead.py), on one
    thread: had it run OpenMP on two, its forked judges' next parallel product would wait forever for
    threads they do not have (measured: it hung)."""
    proc = subprocess.run([sys.executable, "-c", AHEAD_THEN_FORK], capture_output=True, text=True, timeout=90,
                          check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.split() == ["computed", "1", "threads", "2", "child", "0"], proc.stderr[-2000:]


FORKED_IMPORTS = """
import sys, torch
from grader.spawn.forkserver import PRELOAD, PRELOAD_IF_INSTALLED, _imported_forkable
role = sys.argv[1]
assert _imported_forkable(PRELOAD[role], PRELOAD_IF_INSTALLED[role])  # as a server starts (the judge's checks aside)
from grader.wire import codec
from grader.wire.messages import MESSAGE_TYPES
compiled = set(codec._PLANS) == set(MESSAGE_TYPES.values())  # every message's plan, before a child forks
if role == "learner":
    from grader.learner.deferred import defer_dynamo
    defer_dynamo()  # as the learner process starts (grader/learner/__main__.py)
before = set(sys.modules)
from torch import nn
from torch.utils._python_dispatch import _disable_current_modes
with _disable_current_modes():  # the grader's own, on both sides
    pass
if role == "learner":  # what a grading's learner code does on the stand-in: a training with an optimizer
    from grader.emulation.standin import StandIn
    with StandIn("cuda") as s:
        model = nn.Linear(4, 2).to(s.device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(3, 4, device=s.device)).sum().backward()
            opt.step()
        torch.zeros(2)  # a factory with no device: the default device decides
        torch.cuda.synchronize()
print(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("torch", "grader")), compiled)
"""


@pytest.mark.parametrize("role", ["learner", "judge"])
def test_a_forked_process_imports_nothing_of_torch_or_the_grader_that_its_server_could_have(role: str) -> None:
    """What torch imports at its first use on the paths every grading takes is its server's (grader/spawn/
    forkserver.py ``PRELOAD_IF_INSTALLED``): each forked process imported it again, and in the learner
    process each import made the next session scan sys.modules for the learner's modules again. So is the
    codec's plan of every message (grader/wire/codec.py ``prepare``: 7 ms in each forked child)."""
    proc = subprocess.run([sys.executable, "-c", FORKED_IMPORTS, role], capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["[]", "True"], proc.stdout


KERNELS_THEN_FORK = """
import os, sys, torch
from grader.emulation import autocast
from grader.spawn.forkserver import PRELOAD, PRELOAD_IF_INSTALLED, _imported_forkable
assert _imported_forkable(PRELOAD["learner"], PRELOAD_IF_INSTALLED["learner"], learner=True)  # as the learner's server
registered = autocast.kernels.cache_info().currsize
from grader.emulation.patching import preloaded_modules
recorded = preloaded_modules.cache_info().currsize == 1 and id(sys.modules["torch"]) in preloaded_modules()
key = autocast.kernels().name
before = sorted(torch._C._dispatch_get_registrations_for_dispatch_key(key))
print("server", registered, len(before) > 150, recorded)
pid = os.fork()
if pid == 0:  # a learner process: a stand-in's autocast, on the kernels its server registered
    started = []
    sys.addaudithook(lambda event, args: started.append(args[0]) if event == "subprocess.Popen" else None)
    from grader.learner.sessions import hello
    named = hello("auto").cpu_name
    print("hello", bool(named), started, flush=True)
    from grader.emulation.standin import StandIn
    with StandIn("cuda") as s:
        a = torch.randn(4, 4, device=s.device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            dtypes = ((a @ a).dtype, torch.softmax(a @ a, dim=-1).dtype)
    same = sorted(torch._C._dispatch_get_registrations_for_dispatch_key(key)) == before
    print("child", dtypes == (torch.bfloat16, torch.float32), same, autocast.kernels.cache_info().misses, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_the_learner_s_server_registers_the_stand_ins_autocast_kernels_and_its_children_only_use_them() -> None:
    """The stand-ins' autocast kernels (grader/emulation/autocast.py) are the learner's server's, registered
    before it forks: a forked learner process's stand-in casts by CUDA's policy with them and registers none
    (each session registered ~200 and took them off again: 23 ms at a process's first, 2.5 ms each after).
    The server also records the modules it holds, none of them the learner's (``preloaded_modules``), and asks
    the processor's name once: a child's Hello starts no ``uname -p`` of its own."""
    proc = subprocess.run([sys.executable, "-c", KERNELS_THEN_FORK], capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    expected = ["server", "1", "True", "True", "hello", "True", "[]", "child", "True", "True", "1"]
    assert proc.stdout.split() == expected, proc.stderr[-2000:]


COLLECT_ONCE = """
import dataclasses, sys
from grader.course import load_course
from grader.judge.session import serve_collected
from grader.wire.messages import Plan, PlannedCheck, Start

course = load_course()
checks = tuple(PlannedCheck(c.id, c.nodeid, c.timeout_s) for c in reversed(course.checks))  # any order, any subset
plan = Plan(checks[:7], Start({}, "/tmp", 1.0, 1.0), "cpu", 0, 0, "")
if sys.argv[1] == "broken":  # a check module that does not import
    sys.modules["grader.checks." + course.checks[0].nodeid.split("::")[0][:-3].replace("/", ".")] = None

def loop(collected):  # prints to the process's stdout: inside the session, sys.stdout is pytest's sink
    out = sys.__stdout__
    print("served", collected is not None, file=out)
    if collected is not None:
        items = [item.nodeid for item in collected.items(plan)]
        print("in_order", items == [c.nodeid for c in plan.checks] + ["test_canary.py::test_canary"], file=out)
        nope = PlannedCheck("ex1.nope", "ex1_device/test_nope.py::test_nope", 1.0)
        unknown = dataclasses.replace(plan, checks=(nope,))
        print("unknown", collected.items(unknown), file=out, flush=True)

serve_collected(loop)
print("after", sys.stdout.name if hasattr(sys.stdout, "name") else "?")
"""


@pytest.mark.parametrize("checks", ["importable", "broken"])
def test_a_judge_server_collects_the_checks_once_and_serves_inside_that_session(checks: str) -> None:
    """The judge's server forks its judges from inside a pytest session that collected every check
    (grader/judge/session.py ``serve_collected``): each judge takes its plan's checks, in the plan's order,
    and a plan naming a check the server did not collect gets None (that judge collects for itself). A check
    that does not import fails the server's collection: it then serves after that session, handing None,
    so that every judge collects for itself and reports what failed, as an exec'd judge does."""
    proc = subprocess.run([sys.executable, "-c", COLLECT_ONCE, checks], capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT, env=base_env())  # a server's (pytest's plugins not autoloaded)
    expected = (["served", "True", "in_order", "True", "unknown", "None"] if checks == "importable"
                else ["served", "False"])
    assert proc.stdout.split()[:-2] == expected, (proc.stdout, proc.stderr[-2000:])
    assert proc.stdout.split()[-2:] == ["after", "<stdout>"]  # the server's own stdout, given back


def _current_bytecode(source: Path) -> bool:
    """Whether Python's import would use the .pyc beside ``source`` rather than compile it again: the
    header's magic number, its timestamp mode, the source's mtime and size (importlib's own check)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    if not cached.exists():
        return False
    header = cached.read_bytes()[:16]
    stat = source.stat()
    return header == (importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
                      + (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                      + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little"))


def test_a_graders_launchers_leave_every_module_their_processes_import_compiled(tmp_path: Path) -> None:
    """The judge and the learner process never write bytecode (``base_env``; a read-only sandbox), and the
    grader's own process imports neither the checks nor the judge: each launcher compiles the package
    first (``compile_ahead``), what is stale too, and writes nothing where its own Python may not."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "grader", copy / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(copy)
    program = ("from grader.run import isolation, launch\nfrom grader.run.share import WHOLE\n"
               "with launch.{}: pass\n")
    sources = sorted((copy / "grader").rglob("*.py"))
    checks = [s for s in sources if "checks" in s.relative_to(copy).parts]
    assert len(checks) > 30

    for opened in ("grading_launcher(isolation.NONE)", "launcher_for_batch(False, WHOLE, isolation.NONE)"):
        for source in (copy / "grader").rglob("__pycache__"):
            shutil.rmtree(source)
        subprocess.run([sys.executable, "-c", program.format(opened)], env=env, check=True, cwd=tmp_path)
        assert [str(s.relative_to(copy)) for s in sources if not _current_bytecode(s)] == [], opened

    edited = checks[0]
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    os.utime(edited, (time.time() + 5, time.time() + 5))  # a later second than its old bytecode's
    assert not _current_bytecode(edited)
    subprocess.run([sys.executable, "-c", program.format("grading_launcher(isolation.NONE)")], env=env, check=True,
                   cwd=tmp_path)
    assert _current_bytecode(edited)

    for source in (copy / "grader").rglob("__pycache__"):
        shutil.rmtree(source)
    subprocess.run([sys.executable, "-c", program.format("grading_launcher(isolation.NONE)")],
                   env={**env, "PYTHONDONTWRITEBYTECODE": "1"}, check=True, cwd=tmp_path)
    assert list((copy / "grader").rglob("*.pyc")) == []
