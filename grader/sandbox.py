"""Run the checks in a child process that may die, and collect what it reports.

The learner's code never runs in the grader's process. Each child gets its own session
(so it and everything it starts can be killed as a group), resource limits, a temporary
work dir holding only the learner's modules, and a wall-clock deadline per check. When a
child dies mid-run (sys.exit, os._exit, a segfault, a timeout), the check it was running is
charged, and a fresh child carries on with the checks that are left, so a crash in one
exercise never costs another exercise its points.
"""

from __future__ import annotations

import contextlib
import json
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.channel import parse
from grader.course import CheckSpec, Limits
from grader.results import CheckMode, CheckStatus, DeviceInfo
from grader.submission import SourceFile

GRACE_S = 10.0  # pytest-timeout (SIGALRM) ends a check first; this catches a child stuck in C code
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CheckOutcome:
    id: str
    status: CheckStatus
    message_id: str = ""
    params: Mapping[str, str] = field(default_factory=dict)
    mode: CheckMode | None = None
    duration_s: float = 0.0


@dataclass(frozen=True)
class SandboxRun:
    outcomes: Mapping[str, CheckOutcome]
    device: DeviceInfo | None
    notes: tuple[str, ...]
    children: int


@dataclass
class _Child:
    """One child process and what it said so far."""

    process: subprocess.Popen[bytes]
    read_fd: int
    key: bytes
    buffer: bytes = b""
    current: str | None = None
    importing: str | None = None
    forged: int = 0
    canary: str | None = None
    done: bool = False


def _limits_preexec(limits: Limits) -> Any:
    def apply() -> None:
        os.setsid()
        mib = 1024 * 1024
        for which, value in (
            (resource.RLIMIT_AS, limits.memory_mb * mib),
            (resource.RLIMIT_CPU, limits.cpu_seconds),
            (resource.RLIMIT_FSIZE, limits.file_size_mb * mib),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(which, (value, value))

    return apply


def _write_sources(workdir: Path, sources: Iterable[SourceFile]) -> None:
    for source in {s.module: s for s in sources}.values():
        (workdir / f"{source.module}.py").write_text(source.text, encoding="utf-8")


def _spawn(workdir: Path, log: Path, plan: dict[str, Any], device: str, limits: Limits) -> _Child:
    read_fd, write_fd = os.pipe()
    key = secrets.token_bytes(32)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(PYTHONPATH=str(PACKAGE_ROOT), PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0",
               PYTHONIOENCODING="utf-8", MPLBACKEND="Agg")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "grader.child"],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env,
            pass_fds=(write_fd,), preexec_fn=_limits_preexec(limits),
        )
    os.close(write_fd)
    assert process.stdin is not None
    process.stdin.write(json.dumps({**plan, "fd": write_fd, "key": key.hex()}).encode() + b"\n")
    process.stdin.close()
    return _Child(process, read_fd, key)


def _kill(child: _Child) -> None:
    try:
        os.killpg(child.process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.process.wait()


def run_checks(sources: Mapping[str, SourceFile], checks: list[CheckSpec], *, device: str,
               limits: Limits) -> SandboxRun:
    """Grade ``checks`` (all of exercises that have a source) in as few children as possible."""
    root = Path(tempfile.mkdtemp(prefix="grader-"))
    workdir = root / "work"
    workdir.mkdir()
    try:
        _write_sources(workdir, sources.values())
        return _Runner(root, workdir, sources, checks, device, limits).run()
    finally:
        shutil.rmtree(root, ignore_errors=True)


class _Runner:
    def __init__(self, root: Path, workdir: Path, sources: Mapping[str, SourceFile], checks: list[CheckSpec],
                 device: str, limits: Limits) -> None:
        self.root, self.workdir, self.sources = root, workdir, sources
        self.checks = {c.id: c for c in checks}
        self.device, self.limits = device, limits
        self.outcomes: dict[str, CheckOutcome] = {}
        self.device_info: DeviceInfo | None = None
        self.notes: list[str] = []
        self.deadline = time.monotonic() + limits.run_timeout_s
        self.children = 0

    def pending(self) -> list[CheckSpec]:
        return [c for c in self.checks.values() if c.id not in self.outcomes]

    def plan(self, pending: list[CheckSpec]) -> dict[str, Any]:
        wanted = {c.exercise for c in pending}
        return {
            "workdir": str(self.workdir),
            "device": self.device,
            "sources": {ex: {"module": s.module, "origin": s.origin, "cell_of_line": list(s.cell_of_line)}
                        for ex, s in self.sources.items() if ex in wanted},
            "checks": [{"id": c.id, "nodeid": c.nodeid, "timeout_s": c.timeout_s} for c in pending],
        }

    def run(self) -> SandboxRun:
        while self.pending():
            if time.monotonic() >= self.deadline:
                self.charge_rest("timeout", "run_timeout")
                break
            before = len(self.outcomes)
            self.run_child(self.pending())
            self.children += 1
            if len(self.outcomes) == before:  # nothing progressed: never loop forever
                self.charge_rest("error", "child_failed")
        return SandboxRun(dict(self.outcomes), self.device_info, tuple(self.notes), self.children)

    def charge_rest(self, status: CheckStatus, message_id: str, params: Mapping[str, str] | None = None) -> None:
        for check in self.pending():
            self.outcomes[check.id] = CheckOutcome(check.id, status, message_id, dict(params or {}))

    def run_child(self, pending: list[CheckSpec]) -> None:
        child = _spawn(self.workdir, self.root / "output.log", self.plan(pending), self.device, self.limits)
        results: dict[str, CheckOutcome] = {}
        check_deadline = self.deadline
        killed_for: str | None = None
        try:
            while True:
                wait = min(check_deadline, self.deadline) - time.monotonic()
                if wait <= 0:
                    killed_for = "check_timeout" if check_deadline < self.deadline else "run_timeout"
                    _kill(child)
                    break
                ready, _, _ = select.select([child.read_fd], [], [], wait)
                if not ready:
                    continue
                chunk = os.read(child.read_fd, 65536)
                if not chunk:
                    break
                for message in self.messages(child, chunk):
                    if message.get("event") == "start":
                        spec = self.checks.get(str(message.get("check")))
                        check_deadline = time.monotonic() + (spec.timeout_s if spec else 30) + GRACE_S
                    elif message.get("event") == "result" and message.get("check") in self.checks:
                        results[message["check"]] = self.outcome(message)
                        check_deadline = self.deadline
        finally:
            os.close(child.read_fd)
            if child.done:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(timeout=5)
            _kill(child)  # also whatever it left running in its session
        self.settle(child, results, killed_for)

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
            elif event == "result":
                child.current = None
            elif event == "importing":
                child.importing = str(message.get("module"))
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
                            message.get("mode") or "cpu", float(message.get("duration_s", 0.0)))

    def settle(self, child: _Child, results: dict[str, CheckOutcome], killed_for: str | None) -> None:
        if child.forged or (child.done and child.canary != "failed"):
            self.notes.append("tampering")
            for check_id in results:
                results[check_id] = CheckOutcome(check_id, "failed", "tampered")
        self.outcomes.update(results)
        if child.done or not self.pending():
            return
        code = child.process.returncode
        reason = {"message": killed_for or "child_died", "params": {"code": _describe_exit(code)}}
        if child.importing is not None:
            for ex_id, source in self.sources.items():
                if source.module == child.importing:
                    for check in self.pending():
                        if check.exercise == ex_id:
                            self.outcomes[check.id] = CheckOutcome(check.id, "error", "died_on_import",
                                                                   {"code": _describe_exit(code),
                                                                    "origin": source.origin})
        elif child.current is not None and child.current in self.checks:
            status: CheckStatus = "timeout" if killed_for else "error"
            self.outcomes[child.current] = CheckOutcome(child.current, status, str(reason["message"]),
                                                        reason["params"])
        if killed_for == "run_timeout":
            self.charge_rest("timeout", "run_timeout")


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "?"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
