"""How a run's processes start (grader/run/launch.py): chosen by the caller, never by module state,
and grading never depends on the fork server.

Forked processes themselves are tested end to end in tests/test_hostile.py (``batch``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.course import load_course
from grader.grading import grade
from grader.run import launch
from tests.conftest import ROOT, copy_solutions


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


def test_no_process_module_keeps_a_switch_or_imports_another_in_a_cycle() -> None:
    """The launcher is passed in; the process modules import one way: sandbox -> launch, and the fork
    server imports neither."""
    names = ("run.sandbox", "run.launch", "spawn.forkserver", "judge.__main__", "judge.plugin", "run.blame")
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
