"""The sandboxed child: runs the checks under pytest against the learner's code.

Started by sandbox.py in its own session and temporary work dir: as ``python -m grader.child``,
or (``grader batch``) forked from a fork server that already imported torch (grader/forkserver.py),
which then calls ``main()``. Reads its plan (and the channel key) from stdin before importing any learner code,
then reports over the signed channel: which check starts, and how each one ended.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from typing import Any

import pytest

from grader.channel import Writer
from grader.checks.support.devices import apply_gpu_share, real_accelerator_type
from grader.checks.support.outcomes import AlreadyTimedOut, CheckFailed, LearnerRaised, NotAttempted
from grader.checks.support.standin import NO_CUDA
from grader.errors import error_line
from grader.kernel import Kernel, install
from grader.submission import SourceFile
from grader.toplevel import MEMORY_SIGNS, TopLevel, TopLevelLimits

CHECKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checks")
CANARY = "test_canary.py::test_canary"
_perf_counter = time.perf_counter  # checks patch the clocks (the stand-in's virtual time); durations use the real one
PLUGIN_NAME = "grader-channel"  # grader/checks/conftest.py finds the plan under this name
# What the learner's code hitting the file-size limit looks like from inside the process.
FILE_LIMIT_SIGNS = ("File too large", "[Errno 27]")
# pytest's exit codes that mean it could not run the checks at all: interrupted (a collection
# error), internal error, usage error (a plugin is missing), no tests collected.
PYTEST_COULD_NOT_RUN = (2, 3, 4, 5)


def graded_on(devices: list[tuple[str, str]]) -> tuple[str, list[str]]:
    """A check's mode (a real accelerator, else the stand-in, else the CPU) and its devices' labels."""
    modes = {mode for mode, _ in devices}
    mode = next((m for m in ("cuda", "mps", "standin") if m in modes), "cpu")
    return mode, [label for _, label in devices]


def classify(exc: BaseException | None) -> dict[str, Any]:
    """How a check ended, as the parent needs it: status, message id and its parameters."""
    if exc is None:
        return {"status": "passed"}
    if isinstance(exc, AlreadyTimedOut):
        return {"status": "timeout", "message": "function_timed_out", "params": {"function": exc.name}}
    if isinstance(exc, NotAttempted):
        return {"status": "not_attempted", "message": "not_attempted", "params": {"function": exc.name}}
    if isinstance(exc, CheckFailed):
        return {"status": "failed", "message": exc.message_id, "params": exc.params}
    if isinstance(exc, LearnerRaised) and any(sign in exc.exc_text for sign in FILE_LIMIT_SIGNS):
        return {"status": "error", "message": "file_size_limit", "params": {"where": exc.where, **exc.params}}
    if isinstance(exc, LearnerRaised) and NO_CUDA in exc.exc_text and not exc.params.get("device", "").startswith(
            "cuda"):
        # torch.cuda called for an Apple GPU or the CPU: what a Mac or a CPU-only machine says to it.
        return {"status": "error", "message": "cuda_api_off_cuda",
                "params": {"error": exc.exc_text, "where": exc.where, "during": exc.during, **exc.params}}
    if isinstance(exc, LearnerRaised):
        # Running out of memory outside the grader's budget (the process's own limit) is a limit.
        limit = any(sign in exc.exc_text for sign in MEMORY_SIGNS) and "grader's memory budget" not in exc.exc_text
        return {"status": "error", "message": "memory_limit" if limit else "learner_raised",
                "params": {"error": exc.exc_text, "where": exc.where, "during": exc.during, **exc.params}}
    text = str(exc)
    if isinstance(exc, pytest.fail.Exception) and text.startswith("Timeout"):
        return {"status": "timeout", "message": "check_timeout", "params": {}}
    if isinstance(exc, AssertionError):
        return {"status": "failed", "message": "assertion", "params": {"detail": text[:400]}}
    return {"status": "error", "message": "grader_internal",
            "params": {"error": f"{type(exc).__name__}: {text[:400]}"}}


class ChannelPlugin:
    """Registered before collection; owns the channel writer."""

    def __init__(self, plan: dict[str, Any], writer: Writer) -> None:
        self.plan = plan
        self._writer = writer
        self._order = {c["nodeid"]: i for i, c in enumerate(plan["checks"])}
        self._by_nodeid = {c["nodeid"]: c for c in plan["checks"]}
        self._first_exc: dict[str, BaseException | None] = {}
        self._started: dict[str, float] = {}
        self._devices: dict[str, list[tuple[str, str]]] = {}  # nodeid -> (mode, label) of each device it ran on
        self.learner_started = False  # a learner module began running: from here on, nothing is the grader's alone
        self.grader_error_sent = False
        top = plan["top_level"]
        limits = TopLevelLimits(float(top["cell_timeout_s"]), float(top["budget_s"]),
                                frozenset((str(module), int(index)) for module, index in top["skip"]))
        sources = {ex: SourceFile.from_plan(source) for ex, source in plan["sources"].items()}
        self.toplevel = TopLevel(sources, plan["workdir"], limits, self.listen)
        self.toplevel.timed_out.update(str(name) for name in plan.get("timed_out", ()))

    def listen(self, event: str, payload: dict[str, Any]) -> None:
        """What the learner's top level does, cell by cell, for the parent to see."""
        self.learner_started = True
        self.send({"event": event, **payload})

    def send(self, message: dict[str, Any]) -> None:
        self._writer.send(message)

    def _check(self, nodeid: str) -> dict[str, Any] | None:
        return self._by_nodeid.get(nodeid)

    def grader_error(self, kind: str, error: str) -> None:
        """The grader itself cannot run the checks (its environment is broken): say so, once.

        Only before any learner code ran, so that a learner cannot pass its own failure off
        as the grader's."""
        if not self.learner_started and not self.grader_error_sent:
            self.grader_error_sent = True
            self.send({"event": "grader_error", "kind": kind, "error": error})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # a check module did not import: a missing package, a broken install
            self.grader_error("checks_not_loaded", error_line(str(report.longrepr)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The learner's top level runs once, after the checks were collected (their private
        references to torch are taken first) and before any check: outside every check's timeout."""
        if not self.grader_error_sent and session.items:
            self.toplevel.run_all()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items.sort(key=lambda item: self._order.get(item.nodeid, len(self._order)))
        for item in items:
            check = self._check(item.nodeid)
            if check is not None:
                item.add_marker(pytest.mark.timeout(check["timeout_s"], method="signal"))

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._first_exc[nodeid] = None
        check = self._check(nodeid)
        if check is not None:
            self._started[nodeid] = _perf_counter()
            self.send({"event": "start", "check": check["id"]})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
        yield
        if call.excinfo is not None and self._first_exc.get(item.nodeid) is None:
            self._first_exc[item.nodeid] = call.excinfo.value

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        check = self._check(nodeid)
        if nodeid.endswith(CANARY):
            self.send({"event": "canary", "status": classify(self._first_exc.get(nodeid))["status"]})
        if check is None:
            return
        result = classify(self._first_exc.get(nodeid))
        mode, labels = graded_on(self._devices.get(nodeid, []))
        result.update({"event": "result", "check": check["id"], "mode": mode, "devices": labels,
                       "duration_s": round(_perf_counter() - self._started.get(nodeid, 0.0), 4)})
        self.send(result)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.user_properties:
            ran_on = self._devices.setdefault(report.nodeid, [])
            for key, value in report.user_properties:
                if key == "device" and tuple(value) not in ran_on:
                    ran_on.append(tuple(value))


def describe_device(forced: str) -> dict[str, Any]:
    import torch

    kind = real_accelerator_type() if forced != "cpu" else None
    if kind == "cuda":
        name = torch.cuda.get_device_name(0)
    elif kind == "mps":
        name = "Apple MPS"
    else:
        import platform

        name = platform.processor() or platform.machine() or "cpu"
    return {"type": kind or "cpu", "name": name, "torch": torch.__version__, "standin": kind is None}


class _Registrar:
    """Registers the channel plugin under the name the checks' conftest looks up, and
    gives pytest's terminal reporter a sink of its own (pytest-timeout needs the reporter,
    the learner's output should not hold pytest's progress dots)."""

    def __init__(self, plugin: ChannelPlugin, stdout: Any) -> None:
        self._plugin = plugin
        self._stdout = stdout

    def pytest_configure(self, config: pytest.Config) -> None:
        config.pluginmanager.register(self._plugin, PLUGIN_NAME)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        sys.stdout = self._stdout  # the reporter holds the sink; the learner prints to stdout


def main() -> int:
    plan = json.loads(sys.stdin.readline())
    writer = Writer(int(plan["fd"]), bytes.fromhex(plan.pop("key")))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.chdir(plan["workdir"])
    sys.path.insert(0, plan["workdir"])
    install(Kernel())  # get_ipython(), display, input(), google.colab for the learner's cells
    plugin = ChannelPlugin(plan, writer)
    plugin.send({"event": "device", **describe_device(plan.get("device", "auto"))})
    apply_gpu_share()
    # Checks report with fail(), never a bare assert: rewriting them costs ~1 s a child. The
    # unraisable-exception plugin ends the session with five full gc.collect() calls, 0.2 s each
    # over torch's heap. gc.freeze(): what was imported so far is never collected, so a gc the
    # learner's code triggers does not walk torch's objects (nor dirty a fork server's pages).
    gc.freeze()
    args = [
        "-s", "-q", "--no-header", "--tb=no", "--assert=plain", "-p", "no:unraisableexception",
        "-p", "pytest_timeout", "-p", "no:cacheprovider", "-p", "no:stepwise",
        "--rootdir", CHECKS_DIR, "-c", os.path.join(CHECKS_DIR, "pytest.ini"),
        *[os.path.join(CHECKS_DIR, c["nodeid"]) for c in plan["checks"]],
        os.path.join(CHECKS_DIR, CANARY),
    ]
    stdout, sys.stdout = sys.stdout, open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as pytest
    code = pytest.main(args, plugins=[_Registrar(plugin, stdout)])
    if int(code) in PYTEST_COULD_NOT_RUN:
        plugin.grader_error("pytest_failed", f"pytest exit code {int(code)}")
    plugin.send({"event": "done", "pytest_exit": int(code)})
    sys.stdout.flush()
    sys.stderr.flush()
    # Threads or atexit hooks the learner left behind must not keep the child alive.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
