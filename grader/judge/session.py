"""The judge's pytest session (``judge``): waits for the learner process's Hello, then runs the
planned checks under pytest with its plugin (grader/judge/plugin.py), asking the learner process
for every call. Each check's verdict is decided here, from values rebuilt from plain data, and
reported over the signed channel (grader/wire/signed.py); the learner process has neither the key
nor any of the checks' code or expected values. Entered from grader/judge/__main__.py once it has
sent the learner process its Start.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import time
from types import ModuleType
from typing import NoReturn

import pytest

from grader.judge.plugin import CANARY, JudgePlugin, Registrar
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


def judge(plan: Plan, conn: Connection, writer: Writer) -> NoReturn:
    """Run ``plan``'s checks against the learner process at ``conn`` (its Start sent); ends the process."""
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
    args = [*session_args(), *[str(CHECKS_DIR / c.nodeid) for c in plan.checks], str(CHECKS_DIR / CANARY)]
    stdout, sys.stdout = sys.stdout, open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as pytest
    code = pytest.main(args, plugins=[Registrar(plugin, stdout)])
    if int(code) in PYTEST_COULD_NOT_RUN:
        plugin.grader_broken("pytest_failed", f"pytest exit code {int(code)}")
    plugin.send(Done(int(code)))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
