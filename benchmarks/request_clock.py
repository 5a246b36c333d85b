"""Where a learner's CPU goes inside its two processes, request by request, on each process's own clock; prints
Markdown tables, asserts nothing.

    python benchmarks/request_clock.py [--learners 4] [--submission solutions]

Grades ``--learners`` copies of the submission (``grader batch --workers 2 --isolation none``, its processes forked
from the two warm servers as in any batch). The servers start through this file (``--wrap``: this process's
``sys.executable`` is a script that runs it), which before a server's imports makes what its children run read the
thread's CPU clock (``CLOCK_THREAD_CPUTIME_ID``, bound before any session patches ``time``) around what the process
does and nothing else:

* the learner process: each request it answers (``Runner.answer``, by kind, a call by function), each reply it encodes
  and sends (``Runner.reply``), the learner's top level (``Runner.start``), and its clock when it stops serving;
* the judge: each check's whole pytest protocol (setup, call, teardown, reports; its waits for the learner process
  are not its CPU).

Reading CPU time around a request, not around a read that waits, keeps the other process's work and the scheduler's
out of each row (docs/performance.md: an earlier per-request table read the process's clock around the waits, and
was dropped as unreliable). A thread's clock holds the kernel's time on its behalf too (the copy-on-write faults of
a forked child's first touches), not the fork and the exit: `profile_grade.py --by-process` has each process's whole.
"""

from __future__ import annotations

import argparse
import collections
import functools
import gc
import json
import os
import runpy
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRAP = "--wrap"
SERVER = "grader.spawn.forkserver"
_CLOCK = functools.partial(time.clock_gettime, time.CLOCK_THREAD_CPUTIME_ID)  # the real one, whatever patches time


def _wrapped(out: Path, python: str, args: list[str]) -> None:
    """``python ARGS``: a fork server (``-m grader.spawn.forkserver ROLE ...``) in this process, its children's
    clocks read as the docstring says; anything else exec'd as it was asked."""
    if args[:2] != ["-m", SERVER]:
        os.execv(python, [python, *args])
    gc.disable()  # as the server keeps it through its imports (grader/spawn/forkserver.py ``serve``)
    if args[2] == "learner":
        _clock_learner(out)
    else:
        _clock_judge(out)
    sys.argv = [SERVER, *args[2:]]
    sys.path[0] = os.getcwd()  # as ``python -m`` has it
    runpy.run_module(SERVER, run_name="__main__", alter_sys=True)


def _clock_learner(out: Path) -> None:
    from grader.learner.runner import Runner

    spent: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])

    def clocked(method: Callable[..., Any], key_of: Callable[..., str],
                then: Callable[[], None] = lambda: None) -> Callable[..., Any]:
        """``method``, its thread's CPU added to ``spent[key_of(*its arguments)]``; ``then()`` after."""

        def timed(self: Runner, *args: Any) -> Any:
            began = _CLOCK()
            try:
                return method(self, *args)
            finally:
                row = spent[key_of(*args)]
                row[0] += 1
                row[1] += _CLOCK() - began
                then()

        return timed

    def kind(request: Any, *_: Any) -> str:
        function = getattr(request, "function", None)
        return type(request).__name__ + (f" {function}" if function else "")

    def write() -> None:
        (out / f"learner-{os.getpid()}.json").write_text(json.dumps(spent), encoding="utf-8")

    Runner.answer = clocked(Runner.answer, kind)  # type: ignore[method-assign]
    Runner.reply = clocked(Runner.reply, lambda *_: "(replies: encoded and sent)")  # type: ignore[method-assign]
    Runner.start = clocked(Runner.start, lambda *_: "(the learner's top level)")  # type: ignore[method-assign]
    Runner.serve = clocked(Runner.serve, lambda *_: "(serving, all of it)", write)  # type: ignore[method-assign]


def _clock_judge(out: Path) -> None:
    import pytest

    from grader.judge import session

    class Clock:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
            began = _CLOCK()
            yield
            with open(out / f"judge-{os.getpid()}.jsonl", "a", encoding="utf-8") as file:
                file.write(json.dumps([item.name, _CLOCK() - began]) + "\n")

    register = session.register

    def registered(manager: Any, plugin: Any) -> None:
        register(manager, plugin)
        manager.register(Clock(), "request-clock")

    session.register = registered  # type: ignore[assignment]


def _learner_table(out: Path) -> None:
    files = sorted(out.glob("learner-*.json"))
    rows: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for path in files:
        for key, (count, seconds) in json.loads(path.read_text(encoding="utf-8")).items():
            rows[key][0] += count
            rows[key][1] += seconds
    n = max(len(files), 1)
    print(f"\nThe learner process, per learner ({len(files)} learners): CPU ms on its main thread's clock\n")
    print("| request | a learner | ms |")
    print("|---|---:|---:|")
    for key, (count, seconds) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"| {key} | {count / n:g} | {seconds / n * 1000:.1f} |")


def _judge_table(out: Path) -> None:
    files = sorted(out.glob("judge-*.jsonl"))
    rows: dict[str, float] = collections.defaultdict(float)
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            name, seconds = json.loads(line)
            rows[name] += seconds
    n = max(len(files), 1)
    total = sum(rows.values())
    print(f"\nThe judge, per learner ({len(files)} judges): each check's pytest protocol, CPU ms; all {len(rows)} "
          f"checks {total / n * 1000:.1f} ms\n")
    print("| check | ms |")
    print("|---|---:|")
    for name, seconds in sorted(rows.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {seconds / n * 1000:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=4)
    parser.add_argument("--submission", type=Path, default=ROOT / "solutions")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from grader.commands.cli import main as grader_main

    with tempfile.TemporaryDirectory(prefix="bench-clock-") as tmp:
        work = Path(tmp)
        out = work / "clock"
        out.mkdir()
        for i in range(args.learners):
            shutil.copytree(args.submission, work / "class" / f"learner{i:02d}",
                            ignore=shutil.ignore_patterns("__pycache__"))
        wrapper = work / "python"  # what this process's grader starts its servers with
        python, this = shlex.quote(sys.executable), shlex.quote(str(Path(__file__).resolve()))
        wrapper.write_text(f"#!/bin/sh\nexec {python} {this} {WRAP} {shlex.quote(str(out))} {python} \"$@\"\n",
                           encoding="utf-8")
        wrapper.chmod(0o755)
        sys.executable = str(wrapper)  # this benchmark's own process only
        code = grader_main(["batch", str(work / "class"), "-o", str(work / "out"), "--workers", "2", "--quiet",
                            "--isolation", "none", "--lang", "en"])
        if code != 0:
            raise SystemExit(f"the batch failed ({code})")
        _learner_table(out)
        _judge_table(out)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == WRAP:
        _wrapped(Path(sys.argv[2]), sys.argv[3], sys.argv[4:])
    else:
        sys.exit(main())
