"""``grader grade ... --gradescope PATH`` writes Gradescope's results.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.commands.autograde import find_submission
from grader.course import load_course
from grader.score import texts
from tests.conftest import ROOT, course_with, folder_with, run_cli

PICK_DEVICE_AS_STRING = '''
import torch

def pick_device():
    return "cuda" if torch.cuda.is_available() else "cpu"

def describe_device(device):
    raise NotImplementedError
'''
VISIBILITY_LINE = "visibility: {public: visible, hidden: after_published}"
PICK_HINT = texts.hint("en", next(c for c in load_course().checks
                                     if c.id == "ex1.pick_device_returns_device").test_file)


def grade_for_gradescope(tmp_path: Path, submission: Path, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    report, results = tmp_path / "report.yaml", tmp_path / "results" / "results.json"
    proc = run_cli("grade", str(submission), "-o", str(report), "--gradescope", str(results), "--quiet", *extra)
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(report.read_text(encoding="utf-8")), json.loads(results.read_text(encoding="utf-8"))


def test_results_json_has_one_test_per_check(tmp_path: Path) -> None:
    learner = folder_with(tmp_path, "learner", {"ex1_device": PICK_DEVICE_AS_STRING})
    report, results = grade_for_gradescope(tmp_path, learner, "--lang", "en")

    checks = {c["id"]: c for ex in report["exercises"].values() for c in ex["checks"]}
    tests = {t["name"]: t for t in results["tests"]}
    assert list(tests) == list(checks)
    assert results["score"] == report["score"] == sum(t["score"] for t in results["tests"])
    assert isinstance(results["execution_time"], (int, float)) and results["execution_time"] > 0
    for name, test in tests.items():
        assert set(test) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert test["max_score"] == checks[name]["max_points"]
        assert test["status"] == ("passed" if checks[name]["status"] == "passed" else "failed")
        assert test["visibility"] == {"public": "visible", "hidden": "after_published"}[checks[name]["visibility"]]
    assert sum(t["max_score"] for t in results["tests"]) == 100.0

    wrong = tests["ex1.pick_device_returns_device"]
    assert wrong["status"] == "failed" and wrong["score"] == 0.0
    assert wrong["output"].startswith(checks["ex1.pick_device_returns_device"]["message"])
    assert PICK_HINT and f"Hint: {PICK_HINT}" in wrong["output"]
    assert tests["ex2.small_n_answer"]["output"].startswith("Not attempted")

    # The top-level output is seen at once: it counts the hidden checks, never details them.
    hidden_outputs = [t["output"] for t in results["tests"] if t["visibility"] != "visible" and t["output"]]
    assert hidden_outputs and not any(out.splitlines()[0] in results["output"] for out in hidden_outputs)
    assert "Public checks:" in results["output"]
    assert "their results appear when the grades are published" in results["output"]


def test_visibility_comes_from_course_yaml(tmp_path: Path) -> None:
    course = course_with(tmp_path, {VISIBILITY_LINE: "visibility: {public: after_due_date, hidden: hidden}",
                                    "stdout_visibility: hidden": "stdout_visibility: after_published"})
    learner = tmp_path / "learner.py"
    learner.write_text("# nothing yet\n", encoding="utf-8")  # empty: graded without starting a sandbox
    report, results = grade_for_gradescope(tmp_path, learner, "--course", str(course))

    public = {c["id"] for ex in report["exercises"].values() for c in ex["checks"] if c["visibility"] == "public"}
    assert {t["visibility"] for t in results["tests"] if t["name"] in public} == {"after_due_date"}
    assert {t["visibility"] for t in results["tests"] if t["name"] not in public} == {"hidden"}
    assert results["stdout_visibility"] == "after_published" and results["visibility"] == "visible"
    assert results["score"] == 0.0
    assert "check ẩn" in results["output"]  # course.yaml's default language: Vietnamese


@pytest.mark.parametrize(("line", "where"), [
    ("visibility: {public: visible, hidden: later}", "gradescope.visibility.hidden: 'later' must be one of"),
    ("visibility: {public: visible, secret: hidden}", "gradescope.visibility.secret: 'hidden' is under an unknown key"),
    ("stdout_visibility: always", "gradescope.stdout_visibility: 'always' must be one of"),
])
def test_bad_gradescope_visibility_is_a_usage_error(tmp_path: Path, line: str, where: str) -> None:
    old = "stdout_visibility: hidden" if line.startswith("stdout") else VISIBILITY_LINE
    course = course_with(tmp_path, {old: line})
    learner = tmp_path / "learner.py"
    learner.write_text("x = 1\n", encoding="utf-8")
    results = tmp_path / "results.json"
    proc = run_cli("grade", str(learner), "-o", str(tmp_path / "r.yaml"), "--gradescope", str(results),
                   "--course", str(course))
    assert proc.returncode == 2
    assert where in proc.stderr and str(course) in proc.stderr
    assert not results.exists()


@pytest.mark.parametrize(("files", "found"), [
    (["ex1_device.py", "ex2_timing.py"], "."),  # the five files, as uploaded
    (["lesson14-main/ex1_device.py", "lesson14-main/ex3_roundtrip.ipynb", "lesson14-main/README.md"],
     "lesson14-main"),  # a zip's top folder, a GitHub repository
    (["__MACOSX/work/ex1_device.py", "work/ex1_device.py", "work/.ipynb_checkpoints/ex1_device.py"], "work"),
    (["a/b/ex2_timing.py", "c/ex1_device.py", "c/ex2_timing.py"], "c"),  # the shallowest folder wins
    (["colab/Bai14.ipynb", "notes.txt"], "colab/Bai14.ipynb"),  # one notebook, wherever it is
    (["notes.txt"], None),  # nothing to grade
])
def test_the_submission_is_found_wherever_gradescope_put_it(tmp_path: Path, files: list[str],
                                                           found: str | None) -> None:
    root = tmp_path / "submission"
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x = 1\n", encoding="utf-8")
    modules = load_course().modules.values()
    assert find_submission(root, modules) == (None if found is None else root / found)


def test_autograde_without_a_submission_folder_still_writes_a_page(tmp_path: Path) -> None:
    proc = run_cli("autograde", "--root", str(tmp_path), "--lang", "en")
    assert proc.returncode == 2 and "Submission not found" in proc.stderr
    results = json.loads((tmp_path / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == 0.0 and results["tests"] == []
    assert results["output"].startswith("The autograder could not grade this submission (Submission not found")


def test_a_package_that_would_hold_a_solution_is_not_written(tmp_path: Path) -> None:
    """An instructor who points a stub at the solution (or leaves an answer in a stub) gets no zip."""
    course = course_with(tmp_path, {"stub: exercises/ex3_roundtrip.py": "stub: solutions/ex3_roundtrip.py"})
    (tmp_path / "pyproject.toml").symlink_to(ROOT / "pyproject.toml")
    package = tmp_path / "autograder.zip"
    proc = run_cli("release", "--gradescope", "-o", str(package), "--course", str(course))
    assert proc.returncode == 2, proc.stdout
    assert "would hold a solution (exercises/ex3_roundtrip.py)" in proc.stderr
    assert not package.exists() and not list(tmp_path.glob("*.partial"))
