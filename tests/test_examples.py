"""The README's "How to add a check", for real: the example checks in docs/examples/, installed as
a newcomer would install them — the module into grader/checks/<exercise module>/, one course.yaml
line, points taken from another check so that they still add up to 100 — in a copy of the grader,
then graded with every correct style (each must pass) and the mistake written for each (it must
lose exactly the checks its header names). One batch grades it all, once for the module.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, Graded, built_once, run_cli
from tests.submissions.catalog import CORRECT_STYLES, read_mistake

EXAMPLES = ROOT / "docs" / "examples"


@dataclass(frozen=True)
class Example:
    check: Path  # the check module, as docs/examples/ holds it
    module: str  # the exercise's module: grader/checks/<module>/ gets the check
    line: str  # its course.yaml line, inserted after ``after``
    after: str
    rebalance: tuple[str, str]  # a course.yaml line whose points make room, and that line afterwards


EXAMPLES_INSTALLED = (
    Example(EXAMPLES / "test_roundtrip_result_on_cpu.py", "ex3_roundtrip",
            "      - {id: roundtrip_result_on_cpu, points: 1, visibility: hidden}",
            "      - {id: roundtrip_returns_cpu, points: 3, visibility: hidden}",
            ("      - {id: roundtrip_values, points: 4}", "      - {id: roundtrip_values, points: 2}")),
    Example(EXAMPLES / "test_roundtrip_result_on_cpu_unfailable.py", "ex3_roundtrip",
            "      - {id: roundtrip_result_on_cpu_unfailable, points: 1, visibility: hidden}",
            "      - {id: roundtrip_result_on_cpu, points: 1, visibility: hidden}",
            ("", "")),
    Example(EXAMPLES / "test_backoff_steps_once.py", "ex4_oom",
            "      - {id: backoff_steps_once, points: 2, visibility: hidden}",
            "      - {id: backoff_matches_full_batch, points: 6, visibility: hidden, timeout_s: 60}",
            ("      - {id: backoff_matches_full_batch, points: 6, visibility: hidden, timeout_s: 60}",
             "      - {id: backoff_matches_full_batch, points: 4, visibility: hidden, timeout_s: 60}")),
)
MISTAKES = sorted((EXAMPLES / "mistakes").glob("*/*.py"))
EXERCISE_FILES = ("ex3_roundtrip.py", "ex4_oom.py")  # the exercises the examples check: nothing else is graded


def install(copy: Path, example: Example) -> None:
    shutil.copy(example.check, copy / "grader" / "checks" / example.module / example.check.name)
    course = copy / "course.yaml"
    text = course.read_text(encoding="utf-8")
    old, new = example.rebalance
    assert example.after in text and old in text, example
    text = text.replace(example.after, f"{example.after}\n{example.line}").replace(old, new) if old else (
        text.replace(example.after, f"{example.after}\n{example.line}"))
    course.write_text(text, encoding="utf-8")


def grade_examples(work: Path) -> None:
    """A copy of the grader with every example installed grades the correct styles and the mistakes."""
    copy = work / "install"
    shutil.copytree(ROOT / "grader", copy / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("exercises", "solutions"):
        shutil.copytree(ROOT / name, copy / name)
    shutil.copy(ROOT / "course.yaml", copy / "course.yaml")
    for example in EXAMPLES_INSTALLED:
        install(copy, example)
    cls = work / "class"
    for style, folder in CORRECT_STYLES.items():
        learner = cls / f"correct__{style.replace('/', '__')}"
        learner.mkdir(parents=True)
        for name in EXERCISE_FILES:
            shutil.copy(folder / name, learner / name)
    for path in MISTAKES:
        learner = cls / f"mistake__{path.stem}"
        learner.mkdir(parents=True)
        shutil.copy(path, learner / f"{path.parent.name}.py")
    proc = run_cli("batch", str(cls), "-o", str(work / "out"), "--workers", "2", "--lang", "en", "--quiet",
                   cwd=copy, env={"PYTHONPATH": str(copy)}, timeout=1800)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Graded]:
    """Learner name -> its report, graded once for the test run."""
    out = built_once(tmp_path_factory, worker_id, "examples", grade_examples) / "out"
    return {path.stem: Graded(0, "", "", yaml.safe_load(path.read_text(encoding="utf-8")))
            for path in out.glob("*.yaml")}


def _status(graded: Graded, check_id: str) -> str:
    return str(graded.check(check_id)["status"])


@pytest.mark.parametrize("style", sorted(CORRECT_STYLES))
def test_every_correct_style_passes_the_example_checks(style: str, graded: dict[str, Graded]) -> None:
    report = graded[f"correct__{style.replace('/', '__')}"]
    assert report.report is not None
    failing = [c for ex in ("ex3", "ex4") for c in report.exercise(ex)["checks"] if c["status"] != "passed"]
    assert failing == []
    assert {"ex3.roundtrip_result_on_cpu", "ex4.backoff_steps_once"} <= {
        c["id"] for ex in ("ex3", "ex4") for c in report.exercise(ex)["checks"]}


@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: p.stem)
def test_each_example_fails_on_the_mistake_written_for_it(path: Path, graded: dict[str, Graded]) -> None:
    """The mistake loses exactly the checks its header names — the example's, and the course's own
    check of the same rule: adding a check means adding it to every existing mistake that now fails it."""
    mistake = read_mistake(path)
    report = graded[f"mistake__{path.stem}"]
    assert report.lost(mistake.exercise) == set(mistake.fails)
    first = report.check(mistake.fails[0])
    assert first["status"] == "failed" and first["message"].startswith(("On cuda", "On mps", "On cpu")), first


def test_the_readme_s_old_sample_cannot_fail(graded: dict[str, Graded]) -> None:
    """``.device`` of a value the judge rebuilt is the judge's CPU: the old sample passes the mistake
    that the same check written with device_of() catches."""
    report = graded["mistake__cpu_only_for_cuda"]
    assert _status(report, "ex3.roundtrip_result_on_cpu") == "failed"
    assert _status(report, "ex3.roundtrip_result_on_cpu_unfailable") == "passed"


def test_the_readme_walks_through_the_example_files() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in (*(e.check for e in EXAMPLES_INSTALLED), *MISTAKES, Path(__file__)):
        assert str(path.relative_to(ROOT)) in readme, path
