"""The judge's pytest session (``judge``): waits for the learner process's Hello, then runs the
planned checks under pytest with its plugin (grader/judge/plugin.py), asking the learner process
for every call. Each check's verdict is decided here, from values rebuilt from plain data, and
reported over the signed channel (grader/wire/signed.py); the learner process has neither the key
nor any of the checks' code or expected values. Entered from grader/judge/__main__.py once it has
sent the learner process its Start.

A judge spends 0.05-0.09 CPU-s before its first check on pytest's start — its configuration, its
plugins, the collection of the check files and their fixtures — the same for every learner of a
class. A batch's judge server (grader/spawn/forkserver.py) therefore runs that start once
(``serve_collected``) and forks its judges from inside the session it collected: each takes the
collected checks (``Collected``), keeps its plan's, in the plan's order, and runs them as pytest's
own loop does. Where the server's collection failed (a check that does not import) or a plan names a
check it did not collect, the judge runs pytest itself, as an exec'd judge always does.
"""

from __future__ import annotations

import faulthandler
import fcntl
import gc
import importlib
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn

import pytest

from grader.judge.plugin import CANARY, JudgePlugin, Registrar, register
from grader.judge.proxy import LearnerProcess
from grader.paths import CHECKS_DIR, PACKAGE_DIR
from grader.wire.codec import ProtocolError
from grader.wire.framing import Connection
from grader.wire.messages import DeviceFound, Done, GraderBroken, Hello, Plan
from grader.wire.signed import Writer

# pytest's own plugins the judge never uses, kept out of its session: each wraps every phase of every
# check or asks every collected file (logging added and removed its handlers three times a check; the
# unraisable-exception plugin ended the session with five full gc.collect() calls). What a check needs
# stays: python, runner, fixtures, mark, skipping, capture (``-s``), assertion (``--assert``), terminal,
# warnings (the checks' filterwarnings), faulthandler, pytest-timeout.
NOT_LOADED = ("unraisableexception", "threadexception", "logging", "cacheprovider", "stepwise", "doctest",
              "unittest", "junitxml", "pastebin", "debugging", "subtests", "setuponly", "setupplan",
              "legacypath", "tmpdir", "monkeypatch", "recwarn")
HELLO_TIMEOUT_S = 300.0  # the learner process imports torch first (minutes on a cold, busy disk)
# pytest's exit codes that mean it could not run the checks at all: interrupted (a collection
# error), internal error, usage error (a plugin is missing), no tests collected.
PYTEST_COULD_NOT_RUN = (2, 3, 4, 5)
SINK_FD = 100  # the lowest fd a judge server's pytest output may take (``serve_collected``)


def import_checks() -> list[ModuleType]:
    """Import every module of the checks (their conftest, each exercise's helpers, each check) under
    the names pytest gives them (its default import mode: the dotted path under the package), for a
    judge server to fork from: a forked judge's pytest then finds each in sys.modules instead of
    reading and compiling some 40 files (0.1-0.2 CPU-s a learner where no .pyc is written). Each
    child still gets them fresh: what a grading changes in a module stays in its own process. Returns
    the modules (for grader/judge/ahead.py ``compute_ahead``)."""
    modules = []
    for path in sorted(CHECKS_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        modules.append(importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts)))
    return modules


def session_args() -> list[str]:
    """The judge's pytest options, before the checks' paths. Checks report with fail(), never a bare
    assert: rewriting them costs ~1 s a process."""
    blocked = [arg for name in NOT_LOADED for arg in ("-p", f"no:{name}")]
    return ["-s", "-q", "--no-header", "--tb=no", "--assert=plain", *blocked, "-p", "pytest_timeout",
            "--rootdir", str(CHECKS_DIR), "-c", str(CHECKS_DIR / "pytest.ini")]


def device_found(hello: Hello) -> DeviceFound:
    if hello.cuda is not None:
        return DeviceFound("cuda", hello.cuda.name, hello.torch, False)
    if hello.mps:
        return DeviceFound("mps", "Apple MPS", hello.torch, False)
    return DeviceFound("cpu", hello.cpu_name or "cpu", hello.torch, True)


class Collected:
    """The checks a judge server collected, for a judge it forked inside that pytest session."""

    def __init__(self, session: pytest.Session, stdout: Any) -> None:
        self._session = session
        self._stdout = stdout  # the process's own: the session's terminal reporter writes to /dev/null

    def items(self, plan: Plan) -> list[pytest.Item] | None:
        """The plan's checks and then the canary, in that order; None when one was not collected."""
        by_nodeid = {item.nodeid: item for item in self._session.items}
        wanted = [*(check.nodeid for check in plan.checks), CANARY]
        if any(nodeid not in by_nodeid for nodeid in wanted):
            return None
        return [by_nodeid[nodeid] for nodeid in wanted]

    def run(self, plugin: JudgePlugin, items: list[pytest.Item]) -> int:
        """What ``pytest.main`` does after collecting, for ``items``: the judge's plugin registered and
        told of the collection as a session of its own would have (its order and deadlines, then the
        learner's top level), then each check's protocol (``_pytest.main.pytest_runtestloop``)."""
        session = self._session
        register(session.config.pluginmanager, plugin)
        sys.stdout = self._stdout
        faulthandler.enable(sys.stderr)  # this judge's stderr, not the one pytest's plugin took from the server
        plugin.pytest_collection_modifyitems(items)
        session.items = items
        session.testscollected = len(items)
        plugin.pytest_collection_finish(session)
        for i, item in enumerate(items):
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=items[i + 1] if i + 1 < len(items) else None)
            if session.shouldfail or session.shouldstop:
                break
        return int(pytest.ExitCode.TESTS_FAILED if session.testsfailed else pytest.ExitCode.OK)


class _Serving:
    """The judge server's plugin: once every check is collected, the server's loop runs inside the session."""

    def __init__(self, loop: Callable[[Collected], None], stdout: Any) -> None:
        self._loop = loop
        self._stdout = stdout
        self.served = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if not session.testsfailed and session.items:  # before any check ran: the collection's errors
            self.served = True
            gc.freeze()  # the collected checks too: children's collections skip them, and leave their pages shared
            self._loop(Collected(session, self._stdout))
        return True  # no check runs in the server


def serve_collected(loop: Callable[[Collected | None], None], targets: list[str] | None = None) -> None:
    """Run ``loop`` inside a pytest session that collected ``targets`` (by default every check), handing it
    the ``Collected`` checks — a judge server forks its judges with them, an exec'd judge judges with them
    itself (``judge_collecting``); where the collection failed, after that session, with None (the judge
    then collects for itself, and says what failed)."""
    # The session's terminal reporter writes to this /dev/null for every judge forked from it: at an fd
    # no child's own can take (a child moves the fds it is handed to 0, 1 and 3 on, over whatever the
    # server held there: at 4, its progress dots went into a judge's signed channel).
    devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    sink = fcntl.fcntl(devnull, fcntl.F_DUPFD_CLOEXEC, SINK_FD)
    os.close(devnull)
    stdout, sys.stdout = sys.stdout, open(sink, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as pytest
    serving = _Serving(loop, stdout)
    try:
        pytest.main([*session_args(), *(targets or [str(CHECKS_DIR)])], plugins=[serving])
    finally:
        sys.stdout = stdout
    if not serving.served:
        loop(None)


def judge_collecting(plan: Plan, conn: Connection, writer: Writer) -> NoReturn:
    """A judge no server collected for (``grader grade``'s exec'd one): collects its plan's checks before
    it waits for the learner process's Hello — pytest's start (0.1 s) beside the learner process's own
    imports, not after them, where it was the last step before a grading's first check — then judges
    inside that session, as a forked judge does inside its server's. Where the collection failed,
    ``judge`` collects again, and reports what failed."""
    targets = [str(CHECKS_DIR / c.nodeid) for c in plan.checks]
    serve_collected(lambda collected: judge(plan, conn, writer, collected), [*targets, str(CHECKS_DIR / CANARY)])
    judge(plan, conn, writer, None)  # (not reached: ``judge`` ends the process)


def judge(plan: Plan, conn: Connection, writer: Writer, collected: Collected | None = None) -> NoReturn:
    """Run ``plan``'s checks against the learner process at ``conn`` (its Start sent); ends the process.
    ``collected``: the checks its server collected (a forked judge), else pytest collects them here."""
    try:
        hello = conn.receive(Hello, deadline=time.monotonic() + HELLO_TIMEOUT_S)
    except (EOFError, OSError, TimeoutError, ProtocolError) as exc:
        # Before any learner code exists in it, the learner process failing is the grader's.
        writer.send(GraderBroken("child_start_failed", f"the learner process did not start ({exc})"))
        writer.send(Done(-1))
        os._exit(0)
    writer.send(device_found(hello))
    learner = LearnerProcess(conn, hello, writer.send)
    plugin = JudgePlugin(plan, writer, learner)
    gc.freeze()
    gc.enable()  # (off through the imports and the collection: grader/judge/__main__.py)
    items = collected.items(plan) if collected is not None else None
    if collected is not None and items is not None:
        code: int = collected.run(plugin, items)
    else:
        args = [*session_args(), *[str(CHECKS_DIR / c.nodeid) for c in plan.checks], str(CHECKS_DIR / CANARY)]
        stdout, sys.stdout = sys.stdout, open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as pytest
        code = pytest.main(args, plugins=[Registrar(plugin, stdout)])
    if int(code) in PYTEST_COULD_NOT_RUN:
        plugin.grader_broken("pytest_failed", f"pytest exit code {int(code)}")
    plugin.send(Done(int(code)))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
