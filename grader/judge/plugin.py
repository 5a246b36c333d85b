"""The judge's pytest plugin: the order of the checks, their deadlines, and each one's verdict.

Registered by grader/judge/session.py before collection (a judge forked from a server that collected
the checks registers it after, and tells it of that collection: ``Collected``). Once the checks are
collected it reads the learner's top level (which the learner process began at ``Start``) and relays
what happened there, cell by cell, to the grader; then each check's outcome becomes a status, a
message id and its parameters (``classify``), reported over the signed channel (grader/wire/signed.py).

When the learner process is lost — it ended, stopped answering within the check's time, or sent
what is not a message — the judge reports ``LearnerLost`` and ends: the grader settles the check
that was running and starts a fresh pair for the checks that are left.
"""

from __future__ import annotations

import builtins
import copy
import os
import sys
import time
from typing import Any

import pytest

from grader.errors import error_line
from grader.judge.outcomes import (
    AlreadyTimedOut,
    CheckFailed,
    GraderInternal,
    LearnerRaised,
    LearnerSideFailed,
    NotAttempted,
    Tampered,
    TimedOut,
)
from grader.judge.proxy import LearnerGone, LearnerProcess
from grader.reference.device import FILE_LIMIT_SIGNS, GENERATOR_OFF_DEVICE, MEMORY_SIGNS, NO_CUDA, PIN_OFF_CPU
from grader.wire.codec import cut
from grader.wire.messages import (
    Canary,
    CheckEnded,
    CheckStarted,
    CheckStatus,
    DeviceMode,
    FunctionTimedOut,
    GraderBroken,
    GraderFailureKind,
    LearnerLost,
    Plan,
    PlannedCheck,
)
from grader.wire.signed import Writer

CANARY = "test_canary.py::test_canary"
PLUGIN_NAME = "grader-judge"  # grader/checks/conftest.py finds the plugin under this name
PLAIN_REPORTS_NAME = "grader-plain-reports"
# The outcomes whose report pytest makes as it always does (``PlainReports``): a skip, and a group of skips.
_GROUP: type[BaseException] | None = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11 on
_PYTESTS_OWN: tuple[type[BaseException], ...] = (pytest.skip.Exception, *((_GROUP,) if _GROUP else ()))
# The judge's own stop for a check, this long past its limit: the learner process interrupts a call at
# the limit itself and says where (a fill loop "still allocating"), and this fires only when it cannot
# (stuck in C code). At 1 s, a busy machine (the suite's two workers grading beside it) delayed the
# learner's answer past it once in a full run: the check said "timeout" without the learner's words.
# (Most likely not the machine: the learner's limit, landing in a weakref callback of the meter's, was
# discarded by Python until 2026-12-06, grader/learner/toplevel.py ``_on_alarm``; beside three busy processes
# the learner process's answer came 2-5 ms after the limit in every run that did not lose it.)
# Below the grader's kill (grader/run/sandbox.py GRACE_S, 3 s), which ends a pair the judge cannot stop.
BACKSTOP_S = 2.0
_perf_counter = time.perf_counter


def graded_on(devices: list[tuple[DeviceMode, str]]) -> tuple[DeviceMode, list[str]]:
    """A check's mode (a real accelerator, else the stand-in, else the CPU) and its devices' labels."""
    modes = {mode for mode, _ in devices}
    order: tuple[DeviceMode, ...] = ("cuda", "mps", "standin")
    mode: DeviceMode = next((m for m in order if m in modes), "cpu")
    return mode, [label for _, label in devices]


def classify(exc: BaseException | None) -> tuple[CheckStatus, str, dict[str, str]]:
    """How a check ended: status, message id and its parameters."""
    if exc is None:
        return "passed", "", {}
    if isinstance(exc, AlreadyTimedOut):
        return "timeout", "function_timed_out", {"function": exc.name}
    if isinstance(exc, TimedOut):
        return "timeout", "check_timeout", {}
    if isinstance(exc, NotAttempted):
        return "not_attempted", "not_attempted", {"function": exc.name}
    if isinstance(exc, CheckFailed):
        return "failed", exc.message_id, exc.params
    if isinstance(exc, Tampered):
        return "error", "tampered_figure", {**exc.params, "what": exc.message_id}
    if isinstance(exc, LearnerSideFailed):
        return "error", "learner_side_failed", {"error": cut(str(exc), 300)}
    if isinstance(exc, LearnerRaised):
        params = {"error": exc.exc_text, "where": exc.where, "during": exc.during, **exc.params}
        if exc.files_full or any(sign in exc.exc_text for sign in FILE_LIMIT_SIGNS):
            return "error", "file_size_limit", {"where": exc.where, **exc.params}
        if NO_CUDA in exc.exc_text and not exc.params.get("device", "").startswith("cuda"):
            # torch.cuda called for an Apple GPU or the CPU: what a Mac or a CPU-only machine says to it.
            return "error", "cuda_api_off_cuda", params
        # Two device mistakes of data loading, whose PyTorch words do not say what to change.
        if GENERATOR_OFF_DEVICE in exc.exc_text:
            return "error", "generator_off_device", params
        if PIN_OFF_CPU in exc.exc_text:
            return "error", "pin_off_cpu", params
        # Running out of memory outside the grader's budget (the process's own limit) is a limit.
        limit = any(sign in exc.exc_text for sign in MEMORY_SIGNS) and "grader's memory budget" not in exc.exc_text
        return "error", "memory_limit" if limit else "learner_raised", params
    text = str(exc)
    if isinstance(exc, pytest.fail.Exception) and text.startswith("Timeout"):
        return "timeout", "check_timeout", {}
    if isinstance(exc, AssertionError):
        return "failed", "assertion", {"detail": cut(text, 400)}
    if isinstance(exc, GraderInternal):
        return "error", "grader_internal", {"error": cut(text, 400)}
    return "error", "grader_internal", {"error": f"{type(exc).__name__}: {cut(text, 400)}"}


class JudgePlugin:
    """Registered before collection: the learner process, the channel, and each check's result."""

    def __init__(self, plan: Plan, writer: Writer, learner: LearnerProcess) -> None:
        self.plan = plan
        self.learner = learner
        self._writer = writer
        self._order = {c.nodeid: i for i, c in enumerate(plan.checks)}
        self._by_nodeid = {c.nodeid: c for c in plan.checks}
        self._first_exc: dict[str, BaseException | None] = {}
        self._started: dict[str, float] = {}
        self._reported: set[str] = set()
        self._devices: dict[str, list[tuple[DeviceMode, str]]] = {}  # nodeid -> (mode, label) of each device it ran on
        self.started_learner = False  # the top level's events are read: from here on, nothing is the grader's alone
        self.broken_sent = False

    def send(self, message: Any) -> None:
        self._writer.send(message)

    def _check(self, nodeid: str) -> PlannedCheck | None:
        return self._by_nodeid.get(nodeid)

    def grader_broken(self, kind: GraderFailureKind, error: str) -> None:
        """The grader itself cannot run the checks (its environment is broken): say so, once, and
        only before the learner's code ran."""
        if not self.started_learner and not self.broken_sent:
            self.broken_sent = True
            self.send(GraderBroken(kind, error))

    def lost(self, gone: LearnerGone) -> None:
        """The learner process is gone: tell the grader, which settles the running check, and end."""
        if gone.reason == "stuck" and self.learner.in_flight:
            self.send(FunctionTimedOut(self.learner.in_flight))
        self.send(LearnerLost(gone.reason, gone.detail[:200]))
        sys.stdout.flush()
        os._exit(0)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a check module did not import: a missing package, a broken install
            self.grader_broken("checks_not_loaded", error_line(str(report.longrepr)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The learner's top level, read once the checks are collected, before any check. (It began
        when the learner process had its imports: grader/judge/__main__.py sent Start first. Until
        here the judge has read nothing the learner's code made: a failure to collect is the grader's.)"""
        if self.broken_sent or not session.items:
            return
        self.started_learner = True
        try:
            self.learner.top_level(self.plan.start, self.send)
        except LearnerGone as gone:
            self.lost(gone)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items.sort(key=lambda item: self._order.get(item.nodeid, len(self._order)))
        for item in items:
            check = self._check(item.nodeid)
            if check is not None:
                item.add_marker(pytest.mark.timeout(check.timeout_s + BACKSTOP_S, method="signal"))

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._first_exc[nodeid] = None
        check = self._check(nodeid)
        if check is not None:
            self._started[nodeid] = _perf_counter()
            self.learner.check_deadline = time.monotonic() + check.timeout_s
            self.send(CheckStarted(check.id, self.refused()))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
        yield
        exc = call.excinfo.value if call.excinfo is not None else None
        if isinstance(exc, LearnerGone):
            self.lost(exc)
        if isinstance(exc, pytest.fail.Exception) and str(exc).startswith("Timeout") and self.learner.in_flight:
            # The learner process did not answer within the check's time: stuck, and of no more use.
            self._end(item.nodeid, exc)
            self.lost(LearnerGone("stuck", "no answer within the check's time"))
        if exc is not None and self._first_exc.get(item.nodeid) is None:
            self._first_exc[item.nodeid] = exc

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self._end(nodeid, self._first_exc.get(nodeid))

    def _end(self, nodeid: str, exc: BaseException | None) -> None:
        if nodeid in self._reported:
            return
        self._reported.add(nodeid)
        if nodeid.endswith(CANARY):
            self.send(Canary(classify(exc)[0]))
        check = self._check(nodeid)
        if check is None:
            return
        status, message, params = classify(exc)
        mode, labels = graded_on(self._devices.get(nodeid, []))
        duration = _perf_counter() - self._started.get(nodeid, _perf_counter())
        self.send(CheckEnded(check.id, status, message, {k: cut(str(v), 400) for k, v in params.items()}, mode,
                             tuple(labels), round(duration, 4), self.refused()))

    def refused(self) -> int:
        """The forks and threads the run's cgroup refused so far (-1: no count to read). Read here, where
        each check begins and ends in step with the learner process: the grader reads the judge's messages
        when it is next scheduled, on a busy machine after the next check's refusals
        (grader/run/sandbox.py ``limited``)."""
        if self.plan.refusals_fd < 0:
            return -1
        try:
            events = os.pread(self.plan.refusals_fd, 4096, 0).decode("ascii", "replace")
        except OSError:
            return -1
        counts = dict(line.partition(" ")[::2] for line in events.splitlines())  # "max 3": the kernel's refusals
        count = counts.get("max", "").strip()
        return int(count) if count.isdigit() else -1

    def graded_on_device(self, nodeid: str, mode: DeviceMode, label: str) -> None:
        """The report says where a check ran: each device it entered."""
        ran_on = self._devices.setdefault(nodeid, [])
        if (mode, label) not in ran_on:
            ran_on.append((mode, label))


class PlainReports:
    """pytest's report of a check that failed, made without formatting the failure's traceback.

    For every failure pytest formats its traceback into the report (``TestReport.from_item_and_call``:
    ``repr_failure`` cuts and filters it, a path parsed and a file stat'ed for each frame, even under
    ``--tb=no``), for a terminal report the judge writes to /dev/null. Nothing reads it: the verdict comes
    from the exception itself (``JudgePlugin.pytest_runtest_makereport``, ``classify``). A learner who
    attempted nothing fails every check: there it was 7-9 % of what a learner costs (A/B 2026-12-06,
    docs/performance.md). The report is otherwise pytest's own (its outcome, duration, keywords), its
    traceback one line of text; a skip keeps pytest's whole report, whose location is what a skip reports."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport | None:
        excinfo = call.excinfo
        if excinfo is None or excinfo.errisinstance(_PYTESTS_OWN):
            return None  # pytest's own report: no traceback to format
        try:  # (pytest's CallInfo and TestReport as pytest >= 7.4 has them; any other: pytest's own report)
            ended = copy.copy(call)  # the same call, its exception left out of pytest's report
            ended.excinfo = None
            report = pytest.TestReport.from_item_and_call(item, ended)
        except (AttributeError, TypeError):
            return None
        report.outcome = "failed"
        report.longrepr = f"{excinfo.typename}: {cut(str(excinfo.value), 400)}"
        return report


def register(manager: pytest.PytestPluginManager, plugin: JudgePlugin) -> None:
    """The judge's plugin under the name the checks' conftest looks up, and ``PlainReports``."""
    manager.register(plugin, PLUGIN_NAME)
    manager.register(PlainReports(), PLAIN_REPORTS_NAME)


class Registrar:
    """Registers the judge's plugins (``register``), and gives pytest's terminal reporter a sink of its own."""

    def __init__(self, plugin: JudgePlugin, stdout: Any) -> None:
        self._plugin = plugin
        self._stdout = stdout

    def pytest_configure(self, config: pytest.Config) -> None:
        register(config.pluginmanager, self._plugin)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        sys.stdout = self._stdout

