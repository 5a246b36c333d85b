"""Run the checks in a judge and a learner process that may die, and collect what they report.

The learner's code never runs in the grader's process, nor in the judge's. Each run starts a
pair (grader/run/launch.py): the learner process in its own session, with the course's resource
limits and an empty temporary work dir; the judge beside it, connected to it by a socket, and
to the grader by a signed channel (grader/wire/signed.py). The grader watches a deadline per check
and per top-level cell and the learner's process count; when a run ends, every process of the run
(children, grandchildren, daemons that left the session: its cgroup, its sandbox's process tree, or
without a sandbox its token, grader/run/reaper.py) is killed. What the judge's messages mean is
settled by grader/run/blame.py: when the learner process dies mid-run, the check it was running is
charged (or the cell it was in is skipped), and a fresh pair carries on with the checks that are
left, so a crash in one exercise never costs another exercise its points.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from grader.course import CheckSpec
from grader.errors import GraderFailure
from grader.paths import PROJECT_ROOT
from grader.run.blame import Context, KillReason, RunEnd, Settled, Trace, settle
from grader.run.cgroups import RunCgroup
from grader.run.isolation import Isolation
from grader.run.launch import Child, ExecLauncher, Launcher, Spawn
from grader.run.reaper import kill_everything, kill_tree, token_tasks, tree_tasks
from grader.run.share import THREAD_VARS, learner_waits
from grader.score.results import CheckOutcome, DeviceInfo
from grader.spawn.confine import HOME, TOKEN_VAR
from grader.wire.codec import encode
from grader.wire.messages import (
    CellStop,
    CheckEnded,
    CheckStarted,
    CheckStatus,
    DeviceFound,
    Done,
    LearnerLost,
    Limits,
    Plan,
    PlannedCheck,
    RequestedDevice,
    Source,
    Start,
    TopLevelEvent,
)
from grader.wire.signed import parse

GRACE_S = 3.0  # the learner process interrupts a call itself; this catches one stuck in C code
WATCH_EVERY_S = 0.25  # how often the process count is checked
# A learner process the judge saw end: how long to wait for its exit status before the kill. With 1 s,
# an H200 learner that ended in ex5 was reported as "ended (?)", its signal lost — most likely its CUDA
# context still being torn down (not measured). Waited when the run ended or the learner process hung
# up; one that exits at once (every learner process does at the judge's end) waits for nothing.
LEARNER_EXIT_WAIT_S = 5.0
# Until the first pair is up: the judge's own wait for the learner process's Hello, and a minute.
STARTUP_S = 360.0
# The longest line the judge signs: each learner text it relays is cut to a few hundred characters
# (grader/judge/proxy.py), so no honest message comes near; a longer line is dropped as forged.
MAX_LINE = 1024 * 1024
MiB = 1024 * 1024


@dataclass(frozen=True)
class SandboxRun:
    outcomes: Mapping[str, CheckOutcome]
    device: DeviceInfo | None
    notes: tuple[str, ...]
    children: int  # runs (judge + learner pairs) it took
    output: str  # what the learner's code printed, cut at limits.output_kb
    grader_error: GraderFailure | None = None  # the checks could not run at all: no verdict
    stops: tuple[CellStop, ...] = ()  # the learner's top-level cells that did not run to their end
    isolation: Isolation | None = None  # how the learner processes were isolated
    out_of_time: bool = False  # stopped at its wall-clock bound (limits.run_timeout_s, or --learner-timeout)
    learner_seconds: float = 0.0  # the wall clock the bound counts: from the first pair's processes being up


@dataclass
class _Output:
    """Keeps the first ``limit`` bytes of a process's output and counts the rest."""

    limit: int
    kept: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.kept), 0)
        self.kept += chunk[:room]
        self.dropped += max(len(chunk) - room, 0)

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        return text + (f"\n[… {self.dropped} more bytes of output cut]" if self.dropped else "")


@dataclass
class Lines:
    """Whole lines out of the chunks a pipe gives, in time linear in what was read: only a new
    chunk is searched for line ends, and a line past ``limit`` bytes is dropped whole (``dropped``
    counts it with the forged ones). Before, each read re-split everything held: the judge relaying
    four 50 MB labels cost this process 21 s of CPU."""

    limit: int
    partial: bytearray = field(default_factory=bytearray)
    overflow: bool = False  # the line being read is past the limit: dropped when it ends
    dropped: int = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if self.overflow or len(self.partial) + end - start > self.limit:
                self.dropped += 1
            else:
                self.partial += chunk[start:end]
                lines.append(bytes(self.partial))
            self.partial.clear()
            self.overflow = False
            start = end + 1
        if not self.overflow and len(self.partial) + len(chunk) - start > self.limit:
            self.partial.clear()
            self.overflow = True
        elif not self.overflow:
            self.partial += chunk[start:]
        return lines


def task_limit(limits: Limits) -> int:
    """Processes and threads a run may have: the course's ``max_processes`` for what the learner's
    code starts, on top of the learner process's own threads — torch's intra-op and inter-op pools,
    up to one each per core (a correct submission on a 128-core machine has about 260), and a few."""
    return limits.max_processes + 2 * (os.cpu_count() or 1) + 16


# The judge computes small references and otherwise waits on the learner process: one torch thread,
# whatever a grading's share of the cores (grader/run/share.py). Threads beyond the cores cost CPU,
# not time (their barriers, OMP_WAIT_POLICY=PASSIVE or not): `grader grade solutions` on 2 idle cores
# took 8.3 CPU-s with the judge on 2 threads, 7.2-7.7 with this, in the same 5 s of wall.
JUDGE_THREADS = {var: "1" for var in THREAD_VARS}


def base_env() -> dict[str, str]:
    """The environment every process of this grader shares (the run's token and device aside)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_")) and k != TOKEN_VAR}
    env.update({"PYTHONPATH": str(PROJECT_ROOT), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
                "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg",
                # Only the plugins the checks need (the judge loads pytest-timeout): whatever else is
                # installed (Colab has many) neither slows the judge nor changes how checks run.
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return env


@dataclass
class _Pair:
    """One run's processes, and what the grader has read from them."""

    judge: Child
    learner: Child
    channel: int
    key: bytes
    token: str  # what marks the run's processes where no sandbox holds them ("" where one does)
    cgroup: RunCgroup | None
    trace: Trace = field(default_factory=Trace)
    refused: int = 0  # forks the cgroup refused before the running check started
    settled: bool = False  # ``refused`` was read as the last check ended, before the next could start
    judge_refused: int = -1  # the count the judge read as the running check began (-1: it has none)
    lines: Lines = field(default_factory=lambda: Lines(MAX_LINE))
    forged: int = 0
    cell_started: list[float] = field(default_factory=list)  # when each running cell started (monotonic)
    oom_kills: int = 0  # processes of the run the kernel stopped past limits.memory_mb (its memory cgroup)

    def tasks(self) -> int:
        """The run's processes and threads, where no cgroup counts them."""
        return token_tasks(self.token) if self.token else tree_tasks(self.learner.pid)


def run_checks(sources: Mapping[str, Source], checks: list[CheckSpec], *, device: RequestedDevice, limits: Limits,
               launcher: Launcher | None = None, seed: int = 0, stop: threading.Event | None = None,
               helpers: tuple[Source, ...] = ()) -> SandboxRun:
    """Grade ``checks`` (all of exercises that have a source) in as few runs as possible. ``stop``: set by
    another thread (a Ctrl-C that thread received: grader/run/lanes.py), it ends the running pair and
    raises KeyboardInterrupt here, as a Ctrl-C in this thread would."""
    root = Path(tempfile.mkdtemp(prefix="grader-"))
    workdir = root / "work"
    workdir.mkdir()
    try:
        return _Runner(workdir, sources, checks, device, limits, launcher or ExecLauncher(), seed, stop,
                       helpers).run()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _end_learner(learner: Child, token: str) -> None:
    """Kill the learner process and everything it started (the run's cgroup, where it has one, is removed
    after this, which kills what is left in it)."""
    if token:
        kill_everything(learner.pid, token)
    elif learner.host_pid:
        kill_tree(learner.pid)  # the sandbox's own process, with its init (a root server's child has a cgroup)


class _Runner:
    def __init__(self, workdir: Path, sources: Mapping[str, Source], checks: list[CheckSpec],  # noqa: PLR0917
                 device: RequestedDevice, limits: Limits, launcher: Launcher, seed: int = 0,
                 stop: threading.Event | None = None, helpers: tuple[Source, ...] = ()) -> None:
        self.workdir, self.sources = workdir, sources
        self.helpers = helpers  # a folder's other modules, importable by the exercises' (grader/wire/messages.py)
        self.stop = stop
        self.seed = seed  # to the judge only, in its Plan: every run of this grading draws the same problems
        self.checks = {c.id: c for c in checks}
        self.device, self.limits, self.launcher = device, limits, launcher
        self.isolation = launcher.isolation
        self.outcomes: dict[str, CheckOutcome] = {}
        self.device_info: DeviceInfo | None = None
        self.notes: list[str] = []
        self.output = _Output(limits.output_kb * 1024)
        self.judge_output = _Output(16 * 1024)
        # The learner's wall-clock bound counts from when its processes are up (the judge's first
        # message, after the learner process's Hello): starting them is the grader's time, which a
        # loaded machine stretches to a minute, and the judge bounds it (HELLO_TIMEOUT_S).
        self.deadline = time.monotonic() + STARTUP_S
        self.clock_started: float | None = None  # when the wall-clock bound started counting
        self.runs = 0
        self.grader_error: GraderFailure | None = None
        self.stops: dict[tuple[str, int], CellStop] = {}  # the first report of each cell wins
        self.skip: set[tuple[str, int]] = set()  # cells that ended a run: later runs skip them
        self.shown: set[tuple[str, int]] = set()  # cells a run started: later runs do not print them again
        self.top_level_spent = 0.0
        self.timed_out: set[str] = set()  # learner functions that ran past a check's limit

    def pending(self) -> list[CheckSpec]:
        return [c for c in self.checks.values() if c.id not in self.outcomes]

    def learner_workdir(self) -> str:
        """Where the learner process works: its sandbox's own tmpfs, or (not isolated) a temporary dir."""
        return HOME if self.isolation.mode == "bwrap" else str(self.workdir)

    def start_message(self, pending: list[CheckSpec]) -> Start:
        # Every module, so that one can import another (`from ex1_device import pick_device`); only the pending
        # exercises' run their top level first (a restart's, a lane's), the others when imported.
        wanted = {c.exercise for c in pending}
        run = tuple(dict.fromkeys(s.module for ex, s in self.sources.items() if ex in wanted))
        return Start(dict(self.sources), self.learner_workdir(),
                     self.limits.cell_timeout_s, max(self.limits.top_level_timeout_s - self.top_level_spent, 0.0),
                     tuple(sorted(self.skip)), tuple(sorted(self.timed_out)), tuple(sorted(self.shown)), run,
                     self.helpers)

    def run(self) -> SandboxRun:
        while self.pending():
            if time.monotonic() >= self.deadline:
                self.charge_rest("timeout", "run_timeout", {"wall_s": f"{self.limits.run_timeout_s:g}"})
                break
            before = len(self.outcomes) + len(self.skip)
            self.run_pair(self.pending())
            self.runs += 1
            if self.grader_error is not None:
                break  # the grader cannot run checks here; another run would fail the same way
            if len(self.outcomes) + len(self.skip) == before:  # nothing progressed: never loop forever
                self.charge_rest("error", "child_failed", {"code": "no check started"})
        out_of_time = any(o.message_id == "run_timeout" for o in self.outcomes.values())
        spent = time.monotonic() - self.clock_started if self.clock_started is not None else 0.0
        return SandboxRun(dict(self.outcomes), self.device_info, tuple(self.notes), self.runs,
                          self.output.text(), self.grader_error, tuple(self.stops.values()), self.isolation,
                          out_of_time, round(spent, 2))

    def charge_rest(self, status: CheckStatus, message_id: str, params: Mapping[str, str] | None = None) -> None:
        for check in self.pending():
            self.outcomes[check.id] = CheckOutcome(check.id, status, message_id, dict(params or {}))

    # -- one run ------------------------------------------------------------------------------
    def spawn(self, pending: list[CheckSpec]) -> _Pair:
        judge_end, learner_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        read_fd, write_fd = os.pipe()
        key = secrets.token_bytes(32)
        base = base_env()
        # The learner's environment carries no mark that it is being graded (issue 22): a cgroup, or
        # the sandbox's process tree, finds the run's processes (grader/run/reaper.py). Only a run
        # without a sandbox has neither, and carries a token instead.
        token = secrets.token_hex(16) if self.isolation.mode == "none" and not self.isolation.cgroups else ""
        marked = {TOKEN_VAR: token} if token else {}
        learner_env = {**base, **learner_waits(base), **marked,
                       **({"CUDA_VISIBLE_DEVICES": ""} if self.device == "cpu" else {})}
        cgroup = (RunCgroup(self.isolation.cgroups, task_limit(self.limits), self.isolation.memory_cgroups,
                            self.limits.memory_mb * MiB) if self.isolation.cgroups else None)
        cgroup_fds: tuple[int, ...] = ()
        events_fds: tuple[int, ...] = ()
        learner: Child | None = None
        try:
            cgroup_fds = cgroup.procs_fds() if cgroup is not None else ()
            events_fds = cgroup.events_fds() if cgroup is not None else ()
            judge_spawn = Spawn("judge", {**base, **JUDGE_THREADS, "CUDA_VISIBLE_DEVICES": ""}, tempfile.gettempdir(),
                                (write_fd, judge_end.fileno(), *events_fds), self.limits)
            self.launcher.prepare(judge_spawn)  # a fork server's imports, beside the learner's start
            learner = self.launcher.start(Spawn("learner", learner_env, self.learner_workdir(), (learner_end.fileno(),),
                                                self.limits, self.device, cgroup_fds))
            learner.stdin.close()
            judge = self.launcher.start(judge_spawn)
        except BaseException:
            # A process that could not start (the machine out of processes or memory): nothing of the run
            # outlives the error — the learner process already started, the run's cgroup, the channel.
            if learner is not None:
                _end_learner(learner, token)
            if cgroup is not None:
                cgroup.remove()
            if learner is not None:
                with contextlib.suppress(Exception):
                    learner.wait(timeout=LEARNER_EXIT_WAIT_S)
                learner.stdout.close()
            os.close(read_fd)
            raise
        finally:
            learner_end.close()
            judge_end.close()
            os.close(write_fd)
            for fd in (*cgroup_fds, *events_fds):
                os.close(fd)
        checks = tuple(PlannedCheck(c.id, c.nodeid, c.timeout_s) for c in pending)
        plan = Plan(checks, self.start_message(pending), self.device, judge.fds[0], judge.fds[1], key.hex(), self.seed,
                    judge.fds[2] if events_fds else -1)
        with contextlib.suppress(OSError):
            judge.stdin.write(encode(plan) + b"\n")
            judge.stdin.close()
        return _Pair(judge, learner, read_fd, key, token, cgroup)

    def run_pair(self, pending: list[CheckSpec]) -> None:
        pair = self.spawn(pending)
        learner_out, judge_out = pair.learner.stdout, pair.judge.stdout
        check_deadline = self.deadline
        killed_for: KillReason | None = None
        open_fds = [pair.channel, learner_out.fileno(), judge_out.fileno()]
        next_watch = time.monotonic() + WATCH_EVERY_S
        trace = pair.trace
        try:
            while pair.channel in open_fds and not trace.done and trace.lost is None:
                if self.stop is not None and self.stop.is_set():
                    raise KeyboardInterrupt  # the pair ends below, as at a Ctrl-C in this thread
                now = time.monotonic()
                # A top-level cell stuck in C code (one huge matmul) ignores its own SIGALRM.
                cell_deadline = (pair.cell_started[-1] + self.limits.cell_timeout_s + GRACE_S
                                 if pair.cell_started else math.inf)
                if now >= min(check_deadline, self.deadline, cell_deadline):
                    killed_for = ("run_timeout" if self.deadline <= min(check_deadline, cell_deadline)
                                  else "cell_timeout" if cell_deadline <= check_deadline else "check_timeout")
                    break
                if now >= next_watch:
                    next_watch = now + WATCH_EVERY_S
                    if (pair.cgroup.limit_hits() > pair.refused if pair.cgroup is not None
                            else pair.tasks() > task_limit(self.limits)):
                        killed_for = "process_limit"
                        break
                wait = min(check_deadline, self.deadline, next_watch, cell_deadline) - now
                ready, _, _ = select.select(open_fds, [], [], max(wait, 0.0))
                if not ready and pair.judge.poll() is not None:
                    break  # the judge is gone; what the learner forked may hold the pipes open
                for fd in ready:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        open_fds.remove(fd)
                    elif fd == pair.channel:
                        for message in self.messages(pair, chunk):
                            if isinstance(message, CheckStarted):
                                spec = self.checks.get(message.check)
                                check_deadline = time.monotonic() + (spec.timeout_s if spec else 30) + GRACE_S
                            elif isinstance(message, CheckEnded):
                                check_deadline = self.deadline
                    elif fd == learner_out.fileno():
                        self.output.add(chunk)
                    else:
                        self.judge_output.add(chunk)
        finally:
            learner_exit = self.end(pair, killed_for)
        self.apply(settle(trace, RunEnd(killed_for, learner_exit, pair.forged, self.judge_output.text(),
                                        pair.oom_kills > 0), self.context()))

    def end(self, pair: _Pair, killed_for: KillReason | None) -> int | None:
        """Stop both processes; the learner process's exit status (its own, where it ended by itself)."""
        trace = pair.trace
        if killed_for is None and (trace.done or trace.lost is not None):
            # A learner process the judge gave up on (stuck in a call past the check's time: a loop whose bare
            # ``except`` swallows its limit) never reads the judge's hang-up: its exit is not waited for.
            waits = [(pair.judge, 5.0)]
            if trace.lost is None or trace.lost.reason != "stuck":
                waits.append((pair.learner, LEARNER_EXIT_WAIT_S))
            for child, wait in waits:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=wait)
        learner_exit = pair.learner.poll()
        if pair.cgroup is not None:
            pair.cgroup.kill()  # every process and thread of the run, wherever it went
        _end_learner(pair.learner, pair.token)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pair.judge.pid, signal.SIGKILL)
        pair.learner.wait()
        pair.judge.wait()
        if pair.cgroup is not None:
            pair.oom_kills = pair.cgroup.oom_kills()
            pair.cgroup.remove()
        self.drain(pair.learner.stdout, self.output)
        self.drain(pair.judge.stdout, self.judge_output)
        os.close(pair.channel)
        if pair.cell_started:
            self.top_level_spent += time.monotonic() - pair.cell_started[-1]
        return learner_exit

    @staticmethod
    def drain(stream: IO[bytes], into: _Output) -> None:
        with contextlib.suppress(OSError, ValueError):
            while select.select([stream], [], [], 0)[0]:
                chunk = os.read(stream.fileno(), 65536)
                if not chunk:
                    break
                into.add(chunk)
        stream.close()

    def messages(self, pair: _Pair, chunk: bytes) -> list[object]:
        """The judge's signed messages in this chunk, folded into the run's trace."""
        lines = pair.lines.feed(chunk)
        pair.forged += pair.lines.dropped
        pair.lines.dropped = 0
        found = []
        for line in lines:
            message = parse(pair.key, line)
            if message is None:
                pair.forged += 1
                continue
            message = self.limited(pair, message)
            if isinstance(message, TopLevelEvent) and message.event == "cell_start":
                pair.cell_started.append(time.monotonic())
                self.shown.add((message.module, message.index))
            elif isinstance(message, TopLevelEvent) and message.event == "cell_end" and pair.cell_started:
                self.top_level_spent += time.monotonic() - pair.cell_started.pop()
            if isinstance(message, DeviceFound) and self.clock_started is None:
                self.clock_started = time.monotonic()
                self.deadline = self.clock_started + self.limits.run_timeout_s
            pair.trace.add(message)
            found.append(message)
            if isinstance(message, (Done, LearnerLost)):
                break
        return found

    def limited(self, pair: _Pair, message: object) -> object:
        """A check during which the kernel refused the learner a process or a thread ran into the
        process limit, whatever the learner's code made of the refusal (the cgroup says so).

        The judge reads the count as each check begins and ends (``CheckStarted.refused``,
        ``CheckEnded.refused``, through the run's ``pids.events`` it is handed), in step with the learner
        process: this process reads the judge's messages only when it is next scheduled, and on a busy
        machine read a check's ``CheckStarted`` after that check's thread bomb — the refusals then looked
        older than the check, and the learner's "can't start new thread" read as its own error. Where the
        judge has no count, this process's own reads stand in: the count before a check taken as the check
        before it ended (starved past that too, the refusals go to that check if it failed — never to a
        passed one)."""
        if pair.cgroup is None:
            return message
        if isinstance(message, CheckStarted):
            if not pair.settled:  # the run's first check: nothing ended before it
                pair.refused = pair.cgroup.limit_hits()
            pair.settled = False
            pair.judge_refused = message.refused
        elif isinstance(message, CheckEnded):
            before, hits = pair.refused, pair.cgroup.limit_hits()
            pair.refused, pair.settled = hits, True  # the next check's count starts here
            if pair.judge_refused >= 0 and message.refused >= 0:  # the judge's own counts: exact
                before, hits = pair.judge_refused, message.refused
            if message.status != "passed" and hits > before:
                return dataclasses.replace(message, status="error", message="process_limit",
                                           params={"limit": str(self.limits.max_processes)})
        return message

    def context(self) -> Context:
        pending = tuple(c.id for c in self.pending())
        return Context(pending, {c.id: c.exercise for c in self.checks.values()},
                       {ex: (s.module, s.origin) for ex, s in self.sources.items()}, self.limits.cell_timeout_s,
                       self.limits.max_processes, self.limits.cpu_seconds, first_run=self.runs == 0,
                       run_timeout_s=self.limits.run_timeout_s, memory_mb=self.limits.memory_mb)

    def apply(self, settled: Settled) -> None:
        if settled.device is not None and self.device_info is None:
            self.device_info = settled.device
        if settled.grader_error is not None:
            self.grader_error = settled.grader_error
            return
        self.outcomes.update(settled.outcomes)
        for stop in settled.stops:
            self.stops.setdefault((stop.module, stop.index), stop)
        for key, kept in settled.kept.items():  # what a skipped cell still defined, for its earlier record
            if key in self.stops and not self.stops[key].kept:
                self.stops[key] = dataclasses.replace(self.stops[key], kept=kept)
        self.skip.update(settled.skip)
        self.timed_out.update(settled.timed_out)
        self.notes.extend(note for note in settled.notes if note not in self.notes)
