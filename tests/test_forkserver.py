"""The fork server's fallbacks: grading never depends on it (grader/forkserver.py).

Forked sandboxes themselves are tested end to end in tests/test_hostile.py (``batch``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import forkserver
from grader.course import load_course
from grader.grading import grade
from tests.conftest import copy_solutions


def test_a_server_that_cannot_start_leaves_sandboxes_to_exec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    starts = []

    def broken(*args: object) -> None:
        starts.append(args)
        raise forkserver.ServerGone("cannot start")

    monkeypatch.setattr(forkserver.ForkServer, "__init__", broken)
    submission = copy_solutions(tmp_path, "ann", only=("ex1", "ex3"))
    with forkserver.fork_servers():
        assert forkserver.enabled()
        report = grade(submission, load_course(), device="cpu", lang="en", exercises=["ex1", "ex3"])
        again = grade(submission, load_course(), device="cpu", lang="en", exercises=["ex1"])
    assert not forkserver.enabled()
    assert [ex.status for ex in report.exercises if ex.id in ("ex1", "ex3")] == ["passed", "passed"]
    assert [ex.status for ex in again.exercises if ex.id == "ex1"] == ["passed"]
    assert len(starts) == 1  # tried once in this thread, then exec'd without waiting on it again


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    with forkserver.fork_servers():
        monkeypatch.setenv(forkserver.ENABLE_VAR, "0")
        assert not forkserver.enabled()
        monkeypatch.setenv(forkserver.ENABLE_VAR, "1")
        assert forkserver.enabled()
