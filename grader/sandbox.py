"""Run the checks in a child process that may die, and collect what it reports.

The learner's code never runs in the grader's process. Each child gets its own session,
resource limits (course.yaml ``limits``), an empty temporary work dir, a wall-clock
deadline per check, and a run token in its environment: when its grading ends, every
process carrying the token (children, grandchildren, daemons that left the session) is
killed. The learner's modules travel in the plan, not as files, so code that deletes its
work dir cannot spoil another file's import. When a child dies mid-run (sys.exit,
os._exit, a segfault, a timeout), the check it was running is charged, and a fresh child
carries on with the checks that are left, so a crash in one exercise never costs another
exercise its points. Within ``forkserver.fork_servers()`` (a batch) the child is forked from a
server that imported torch once instead of exec'd; everything above holds the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import SANDBOX_VAR, forkserver
from grader.channel import parse
from grader.course import CheckSpec, Limits
from grader.errors import GraderFailure, GraderFailureKind, error_line
from grader.results import CheckMode, CheckStatus, DeviceInfo
from grader.submission import SourceFile
from grader.toplevel import STOP_KINDS, CellStop

GRACE_S = 3.0  # pytest-timeout (SIGALRM) ends a check first; this catches a child stuck in C code
WATCH_EVERY_S = 0.25  # how often the process count is checked
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
TOKEN_VAR = "GRADER_RUN_TOKEN"


@dataclass(frozen=True)
class CheckOutcome:
    id: str
    status: CheckStatus
    message_id: str = ""
    params: Mapping[str, str] = field(default_factory=dict)
    mode: CheckMode | None = None
    duration_s: float = 0.0
    devices: tuple[str, ...] = ()  # where it ran: "cpu", "cuda (stand-in)", "mps (stand-in)", ...


@dataclass(frozen=True)
class SandboxRun:
    outcomes: Mapping[str, CheckOutcome]
    device: DeviceInfo | None
    notes: tuple[str, ...]
    children: int
    output: str  # what the learner's code printed, cut at limits.output_kb
    grader_error: GraderFailure | None = None  # the checks could not run at all: no verdict
    stops: tuple[CellStop, ...] = ()  # the learner's top-level cells that did not run to their end


@dataclass
class _Output:
    """Keeps the first ``limit`` bytes of the child's output and counts the rest."""

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
class _Child:
    """One child process and what it said so far."""

    process: subprocess.Popen[bytes] | forkserver.ForkedChild
    channel: int
    key: bytes
    buffer: bytes = b""
    current: str | None = None
    importing: str | None = None
    forged: int = 0
    canary: str | None = None
    done: bool = False
    learner_started: bool = False  # a learner module began running in this child
    grader_error: GraderFailure | None = None
    # The top-level cells running now, innermost last (a cell may import another learner file):
    # (module, index, label, started at).
    cells: list[tuple[str, int, str, float]] = field(default_factory=list)
    calling: str | None = None  # the learner function the running check called last


def apply_limits(limits: Limits) -> None:
    """In the child, before any learner code: its own session and the course's limits."""
    os.setsid()
    mib = 1024 * 1024
    for which, value in (
        # Data, not address space: a CUDA context reserves tens of GiB of address space it
        # never touches, which RLIMIT_AS would refuse; private memory is what a grab uses.
        (resource.RLIMIT_DATA, limits.memory_mb * mib),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mib),
        (resource.RLIMIT_CORE, 0),
    ):
        # The hard CPU limit a little above the soft one: at the soft limit the kernel sends
        # SIGXCPU, which the report can name; at the hard one only an anonymous SIGKILL.
        hard = value + 5 if which == resource.RLIMIT_CPU else value
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, hard))
    # A write past the file-size limit then fails with EFBIG in the learner's code (a
    # result with a message) instead of killing the child with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def sandbox_features() -> dict[str, tuple[bool, str]]:
    """What the sandbox can use on this machine: name -> (works, in words), for ``grader doctor``."""
    features: dict[str, tuple[bool, str]] = {}
    limits = [name for name in ("RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_FSIZE") if hasattr(resource, name)]
    features["resource limits"] = (len(limits) == 3, ", ".join(limits) or "none")
    proc_ok = os.path.isdir(f"/proc/{os.getpid()}") and os.access(f"/proc/{os.getpid()}/environ", os.R_OK)
    features["process tracking"] = (proc_ok, "/proc readable: every process of a run is found and killed" if proc_ok
                                    else "no /proc: only the child's session is killed")
    fork = sys.platform == "linux"
    features["fork server"] = (True, "available (grader batch forks children from a warm process)" if fork
                               else "not on this platform: children are exec'd (slower, same results)")
    return features


def token_processes(token: str) -> list[int]:
    """Every process whose environment carries this run's token."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as env:
                if needle in env.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_everything(pid: int, token: str) -> None:
    """The child's session, then any process that escaped it but still carries the token."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for _ in range(20):
        leftovers = [p for p in token_processes(token) if p != os.getpid()]
        if not leftovers:
            return
        for leftover in leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(leftover, signal.SIGKILL)
        time.sleep(0.05)


def _base_env() -> dict[str, str]:
    """The environment every child of this grader shares (the run's token and device aside)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_")) and k != TOKEN_VAR}
    env.update({"PYTHONPATH": str(PACKAGE_ROOT), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0",
                "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1", "MPLBACKEND": "Agg", SANDBOX_VAR: "1",
                # Only the plugins the checks need (child.py loads pytest-timeout): whatever else is
                # installed (Colab has many) neither slows the child nor changes how checks run.
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return env


def _spawn(workdir: Path, plan: dict[str, Any], device: str, limits: Limits, token: str) -> _Child:
    read_fd, write_fd = os.pipe()
    key = secrets.token_bytes(32)
    base = _base_env()
    env = {**base, TOKEN_VAR: token, **({"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {})}
    process: subprocess.Popen[bytes] | forkserver.ForkedChild | None = None
    channel = write_fd
    if forkserver.enabled():
        try:
            server = forkserver.server_for_this_thread(base, len(token), TOKEN_VAR)
            process = server.spawn(str(workdir), env, dataclasses.asdict(limits), write_fd)
            channel = forkserver.CHANNEL_FD
        except forkserver.ServerGone:
            process = None  # exec this one, as without a server
    if process is None:
        process = subprocess.Popen(
            [sys.executable, "-m", "grader.child"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=workdir, env=env,
            pass_fds=(write_fd,),
            preexec_fn=functools.partial(apply_limits, limits),  # noqa: PLW1509 - must run in the child, before exec
        )
    os.close(write_fd)
    assert process.stdin is not None
    process.stdin.write(json.dumps({**plan, "fd": channel, "key": key.hex()}).encode() + b"\n")
    process.stdin.close()
    return _Child(process, read_fd, key)


def run_checks(sources: Mapping[str, SourceFile], checks: list[CheckSpec], *, device: str,
               limits: Limits) -> SandboxRun:
    """Grade ``checks`` (all of exercises that have a source) in as few children as possible."""
    root = Path(tempfile.mkdtemp(prefix="grader-"))
    workdir = root / "work"
    workdir.mkdir()
    try:
        return _Runner(workdir, sources, checks, device, limits).run()
    finally:
        shutil.rmtree(root, ignore_errors=True)


class _Runner:
    def __init__(self, workdir: Path, sources: Mapping[str, SourceFile], checks: list[CheckSpec],
                 device: str, limits: Limits) -> None:
        self.workdir, self.sources = workdir, sources
        self.checks = {c.id: c for c in checks}
        self.device, self.limits = device, limits
        self.outcomes: dict[str, CheckOutcome] = {}
        self.device_info: DeviceInfo | None = None
        self.notes: list[str] = []
        self.output = _Output(limits.output_kb * 1024)
        self.deadline = time.monotonic() + limits.run_timeout_s
        self.children = 0
        self.grader_error: GraderFailure | None = None
        self.stops: dict[tuple[str, int], CellStop] = {}  # the first report of each cell wins
        self.skip: set[tuple[str, int]] = set()  # cells that ended a child: later children skip them
        self.top_level_spent = 0.0
        self.timed_out: set[str] = set()  # learner functions that ran past a check's limit

    def pending(self) -> list[CheckSpec]:
        return [c for c in self.checks.values() if c.id not in self.outcomes]

    def plan(self, pending: list[CheckSpec]) -> dict[str, Any]:
        wanted = {c.exercise for c in pending}
        return {
            "workdir": str(self.workdir),
            "device": self.device,
            "sources": {ex: s.as_plan() for ex, s in self.sources.items() if ex in wanted},
            "top_level": {"cell_timeout_s": self.limits.cell_timeout_s,
                          "budget_s": max(self.limits.top_level_timeout_s - self.top_level_spent, 0.0),
                          "skip": sorted(self.skip)},
            "timed_out": sorted(self.timed_out),
            "checks": [{"id": c.id, "nodeid": c.nodeid, "timeout_s": c.timeout_s} for c in pending],
        }

    def run(self) -> SandboxRun:
        while self.pending():
            if time.monotonic() >= self.deadline:
                self.charge_rest("timeout", "run_timeout")
                break
            before = len(self.outcomes) + len(self.skip)
            self.run_child(self.pending())
            self.children += 1
            if self.grader_error is not None:
                break  # the grader cannot run checks here; another child would fail the same way
            if len(self.outcomes) + len(self.skip) == before:  # nothing progressed: never loop forever
                self.charge_rest("error", "child_failed", {"code": "no check started"})
        return SandboxRun(dict(self.outcomes), self.device_info, tuple(self.notes), self.children,
                          self.output.text(), self.grader_error, tuple(self.stops.values()))

    def charge_rest(self, status: CheckStatus, message_id: str, params: Mapping[str, str] | None = None) -> None:
        for check in self.pending():
            self.outcomes[check.id] = CheckOutcome(check.id, status, message_id, dict(params or {}))

    def run_child(self, pending: list[CheckSpec]) -> None:
        token = secrets.token_hex(16)
        child = _spawn(self.workdir, self.plan(pending), self.device, self.limits, token)
        stdout = child.process.stdout
        assert stdout is not None
        results: dict[str, CheckOutcome] = {}
        check_deadline = self.deadline
        killed_for: str | None = None
        open_fds = [child.channel, stdout.fileno()]
        next_watch = time.monotonic() + WATCH_EVERY_S
        try:
            while child.channel in open_fds:
                now = time.monotonic()
                # A top-level cell stuck in C code (one huge matmul) ignores its own SIGALRM.
                cell_deadline = child.cells[-1][3] + self.limits.cell_timeout_s + GRACE_S if child.cells else math.inf
                if now >= min(check_deadline, self.deadline, cell_deadline):
                    killed_for = ("run_timeout" if self.deadline <= min(check_deadline, cell_deadline)
                                  else "cell_timeout" if cell_deadline <= check_deadline else "check_timeout")
                    break
                if now >= next_watch:
                    next_watch = now + WATCH_EVERY_S
                    if len(token_processes(token)) > self.limits.max_processes:
                        killed_for = "process_limit"
                        break
                wait = min(check_deadline, self.deadline, next_watch, cell_deadline) - now
                ready, _, _ = select.select(open_fds, [], [], max(wait, 0.0))
                if not ready and child.process.poll() is not None:
                    break  # the child is gone; whatever it forked may hold the pipes open
                for fd in ready:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        open_fds.remove(fd)
                    elif fd == child.channel:
                        for message in self.messages(child, chunk):
                            if message.get("event") == "start":
                                spec = self.checks.get(str(message.get("check")))
                                check_deadline = time.monotonic() + (spec.timeout_s if spec else 30) + GRACE_S
                            elif message.get("event") == "result" and message.get("check") in self.checks:
                                results[message["check"]] = self.outcome(message)
                                check_deadline = self.deadline
                    else:
                        self.output.add(chunk)
                if child.done:
                    break
        finally:
            if child.done and killed_for is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(timeout=5)
            kill_everything(child.process.pid, token)
            child.process.wait()
            self.drain(stdout)
            os.close(child.channel)
        self.settle(child, results, killed_for)

    def drain(self, stdout: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            while select.select([stdout], [], [], 0)[0]:
                chunk = os.read(stdout.fileno(), 65536)
                if not chunk:
                    break
                self.output.add(chunk)
        stdout.close()

    def messages(self, child: _Child, chunk: bytes) -> list[dict[str, Any]]:
        child.buffer += chunk
        *lines, child.buffer = child.buffer.split(b"\n")
        found = []
        for line in lines:
            message = parse(child.key, line)
            if message is None:
                child.forged += 1
                continue
            event = message.get("event")
            if event == "start":
                child.current = str(message.get("check"))
                child.calling = None
            elif event == "result":
                if message.get("status") == "timeout" and child.calling:
                    self.timed_out.add(child.calling)
                child.current = None
            elif event == "calling":
                child.calling = str(message.get("function"))[:120]
            elif event == "grader_error" and not child.learner_started:
                kind = str(message.get("kind"))
                known = kind if kind in _FAILURE_KINDS else "internal"
                child.grader_error = GraderFailure(known, str(message.get("error", ""))[:200])  # type: ignore[arg-type]
            elif event == "importing":
                child.learner_started = True
                child.importing = str(message.get("module"))
            elif event == "cell_start":
                child.learner_started = True
                child.cells.append((str(message.get("module")), int(message.get("index", -1)),
                                    str(message.get("label")), time.monotonic()))
            elif event == "cell_end" and child.cells:
                self.top_level_spent += time.monotonic() - child.cells.pop()[3]
            elif event == "cell_stop":
                self.record_stop(message)
            elif event == "cell_kept":  # a skipped cell's definitions, made by the next child
                self.keep(message)
            elif event == "imported":
                child.importing = None
            elif event == "canary":
                child.canary = str(message.get("status"))
            elif event == "device" and self.device_info is None:
                self.device_info = DeviceInfo(str(message.get("type")), str(message.get("name")),
                                              str(message.get("torch")), bool(message.get("standin")))
            elif event == "done":
                child.done = True
            found.append(message)
        return found

    @staticmethod
    def outcome(message: dict[str, Any]) -> CheckOutcome:
        return CheckOutcome(str(message["check"]), message.get("status", "error"), str(message.get("message", "")),
                            {str(k): str(v) for k, v in (message.get("params") or {}).items()},
                            message.get("mode") or "cpu", float(message.get("duration_s", 0.0)),
                            tuple(str(d)[:60] for d in (message.get("devices") or ())[:8]))

    def record_stop(self, message: Mapping[str, Any]) -> None:
        kind = str(message.get("kind"))
        line = message.get("line")
        stop = CellStop(str(message.get("module")), int(message.get("index", -1)), str(message.get("label"))[:40],
                        int(line) if isinstance(line, int) else None, kind if kind in STOP_KINDS else "error",  # type: ignore[arg-type]
                        str(message.get("error", ""))[:200],
                        tuple(str(name)[:60] for name in (message.get("kept") or ())[:50]))
        self.stops.setdefault((stop.module, stop.index), stop)

    def keep(self, message: Mapping[str, Any]) -> None:
        key = (str(message.get("module")), int(message.get("index", -1)))
        if key in self.stops and not self.stops[key].kept:
            kept = tuple(str(name)[:60] for name in (message.get("kept") or ())[:50])
            self.stops[key] = dataclasses.replace(self.stops[key], kept=kept)

    def settle(self, child: _Child, results: dict[str, CheckOutcome], killed_for: str | None) -> None:
        failure = self.grader_failure(child, results)
        if failure is not None:
            self.grader_error = failure
            return
        if child.forged or (child.done and child.canary != "failed"):
            self.notes.append("tampering")
            for check_id in results:
                results[check_id] = CheckOutcome(check_id, "failed", "tampered")
        self.outcomes.update(results)
        if child.cells and not child.done and killed_for in (None, "cell_timeout", "process_limit"):
            # The child ended inside a top-level cell: that cell is recorded and skipped by the
            # next child, which runs the rest; no check is charged for it.
            module, index, label, started = child.cells[-1]
            self.top_level_spent += time.monotonic() - started
            if killed_for == "cell_timeout":
                kind, error = "timeout", f"the cell ran past its {self.limits.cell_timeout_s:g} s limit"
            elif killed_for == "process_limit":
                kind, error = "ended_process", f"it started more than {self.limits.max_processes} processes"
            else:
                kind, error = "ended_process", _describe_exit(child.process.returncode)
            self.record_stop({"module": module, "index": index, "label": label, "kind": kind, "error": error})
            self.skip.add((module, index))
            return
        if not self.pending() or (child.done and killed_for is None):
            return
        code = _describe_exit(child.process.returncode)
        if child.importing is not None:
            self.charge_import(child.importing, code, killed_for)
        elif child.current is not None and child.current in self.checks:
            if killed_for == "check_timeout" and child.calling:
                self.timed_out.add(child.calling)
            status: CheckStatus = "timeout" if killed_for in ("check_timeout", "run_timeout") else "error"
            # SIGXCPU: the kernel's answer to RLIMIT_CPU (limits.cpu_seconds).
            message = killed_for or ("cpu_limit" if code == "signal SIGXCPU" else "child_died")
            params = {"code": code, "limit": str(self.limits.max_processes), "limit_s": str(self.limits.cpu_seconds)}
            self.outcomes[child.current] = CheckOutcome(child.current, status, message, params)
        if killed_for == "run_timeout":
            self.charge_rest("timeout", "run_timeout")

    def grader_failure(self, child: _Child, results: dict[str, CheckOutcome]) -> GraderFailure | None:
        """Why this child could not run any check, when the cause is the grader's, not the learner's.

        Before the first learner module starts importing, only the grader's code has run: a child
        that ends then (a package missing, a check module that does not import, pytest unable to
        start) says nothing about the learner, so it is the grader's failure, never tampering.
        """
        if child.learner_started or results:
            return None
        failure = child.grader_error
        if failure is None:
            failure = GraderFailure("nothing_ran" if child.done else "child_start_failed", "")
        if not failure.error or failure.kind == "pytest_failed":
            # Before any learner code ran, what the first child printed is the grader's own output.
            printed = error_line(self.output.text()) if self.children == 0 else ""
            text = ": ".join(part for part in (failure.error, printed) if part)
            ended = f"it ended ({_describe_exit(child.process.returncode)})"
            failure = dataclasses.replace(failure, error=text or ended)
        return failure

    def charge_import(self, module: str, code: str, killed_for: str | None) -> None:
        """The file's import killed the child (or never ended): charge every exercise in it."""
        timed_out = killed_for in ("check_timeout", "run_timeout")
        status: CheckStatus = "timeout" if timed_out else "error"
        message = "import_timeout" if timed_out else "died_on_import"
        for ex_id, source in self.sources.items():
            if source.module != module:
                continue
            for check in self.pending():
                if check.exercise == ex_id:
                    self.outcomes[check.id] = CheckOutcome(check.id, status, message,
                                                           {"code": code, "origin": source.origin})


_FAILURE_KINDS = frozenset(GraderFailureKind.__args__)  # type: ignore[attr-defined]


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "?"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
