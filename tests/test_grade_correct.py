"""Every correct style gets full marks; the stubs get zero with every exercise not attempted."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import MODULES, SOLUTIONS, STUBS, Graded, run_cli
from tests.submissions.catalog import CORRECT_STYLES


@pytest.mark.parametrize("style", sorted(CORRECT_STYLES))
def test_correct_style_scores_100(style: str, graded_class: Callable[[str], Graded]) -> None:
    """On every device each function is handed — the CPU, CUDA's and MPS's stand-ins here."""
    graded = graded_class(f"correct__{style.replace('/', '__')}")
    assert graded.report is not None
    failing = {ex: graded.lost(ex) for ex in MODULES if graded.lost(ex)}
    assert failing == {}, [c for ex in MODULES for c in graded.exercise(ex)["checks"] if c["status"] != "passed"]
    assert graded.report["score"] == graded.report["max_score"] == 100.0
    assert all(graded.exercise(ex)["status"] == "passed" for ex in MODULES)


@pytest.fixture(scope="module")
def solutions_graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    """The README's own command on solutions/, one submission exec'd (the catalog above is graded by
    a batch); graded once for the tests below, which each read its report."""
    tmp_path = tmp_path_factory.mktemp("solutions")
    submission = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, submission)
    out = tmp_path / "solutions.yaml"
    proc = run_cli("grade", str(submission), "-o", str(out), "--lang", "en")
    report = yaml.safe_load(out.read_text(encoding="utf-8")) if out.exists() else None
    return Graded(proc.returncode, proc.stdout, proc.stderr, report)


def test_solutions_score_100_with_grader_grade(solutions_graded: Graded) -> None:
    assert solutions_graded.code == 0, solutions_graded.stderr
    assert solutions_graded.report is not None and solutions_graded.report["score"] == 100.0


def test_report_schema(solutions_graded: Graded) -> None:
    report = solutions_graded.report
    assert report is not None
    assert {"score", "max_score", "device", "exercises", "grading_seconds", "lang", "learner"} <= set(report)
    assert report["learner"] == "solutions"
    assert {"type", "name", "torch", "standin"} <= set(report["device"])
    assert list(report["exercises"]) == list(MODULES)
    assert sum(ex["max_score"] for ex in report["exercises"].values()) == 100.0
    for ex in report["exercises"].values():
        assert ex["status"] in {"passed", "partial", "failed", "not_attempted", "error", "timeout"}
        for check in ex["checks"]:
            assert {"id", "status", "points", "max_points", "message", "mode", "visibility"} <= set(check)
            assert check["mode"] in {"cpu", "cuda", "mps", "standin", "static"}


def test_stubs_score_zero_not_attempted(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    submission = tmp_path / "stubs"
    shutil.copytree(STUBS, submission)
    graded = grade_forked(submission)
    assert graded.code == 0
    assert graded.report is not None and graded.report["score"] == 0.0
    for ex in MODULES:
        exercise = graded.exercise(ex)
        assert exercise["status"] == "not_attempted"
        assert {c["status"] for c in exercise["checks"]} == {"not_attempted"}
        assert all("Not attempted" in c["message"] for c in exercise["checks"])
