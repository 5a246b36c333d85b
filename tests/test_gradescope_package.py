"""The Gradescope package (``grader release --gradescope``), built, unpacked and run the way
Gradescope does it: the zip into ``autograder/source``, ``setup.sh`` once (into a venv of its own,
against this machine's package index), then ``run_autograder`` per submission with the learner's
files in ``autograder/submission``; every results.json is checked against Gradescope's format."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import nbformat
import pytest

from grader.commands.gradescope_zip import pinned_requirements, unpack
from grader.course import load_course
from grader.score import texts
from tests.conftest import ROOT, run_cli, solution_text

VISIBILITIES = {"visible", "hidden", "after_due_date", "after_published"}
COURSE = load_course()


@dataclass(frozen=True)
class Gradescope:
    root: Path  # what Gradescope calls /autograder
    venv: Path  # what setup.sh calls /opt/grader
    zip: Path


def _clean_env(**extra: str) -> dict[str, str]:
    """Nothing of this checkout's environment: the package must stand on its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def gradescope(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gradescope]:
    base = tmp_path_factory.mktemp("gradescope")
    package = base / "autograder.zip"
    proc = run_cli("release", "--gradescope", "-o", str(package))
    assert proc.returncode == 0, proc.stderr
    root = base / "autograder"
    unpack(package, root / "source")
    venv = base / "opt-grader"
    # pip's bytecode for every file it installs is 18 of setup.sh's 30 CPU-s here (torch's thousands of modules),
    # which Gradescope's image keeps and this test would throw away: PIP_COMPILE=0 leaves each module compiled
    # when a process first imports it (setup.sh's own `grader doctor` imports torch, pytest and the grader).
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], capture_output=True, text=True, cwd=base,
                           env=_clean_env(GRADER_VENV=str(venv), GRADER_TORCH_INDEX="", PIP_COMPILE="0"),
                           timeout=900, check=False)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    yield Gradescope(root, venv, package)


def _autograde(gs: Gradescope, files: dict[str, str], venv: Path | None = None) -> tuple[dict[str, Any], str]:
    for folder in ("submission", "results"):
        shutil.rmtree(gs.root / folder, ignore_errors=True)
        (gs.root / folder).mkdir()
    for name, text in files.items():
        path = gs.root / "submission" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    proc = subprocess.run([str(gs.root / "source" / "run_autograder")], capture_output=True, text=True,
                          cwd=gs.root, timeout=600, check=False,
                          env=_clean_env(AUTOGRADER_ROOT=str(gs.root), GRADER_VENV=str(venv or gs.venv)))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((gs.root / "results" / "results.json").read_text(encoding="utf-8"))
    _assert_gradescope_format(results)
    return results, proc.stdout


def _assert_gradescope_format(results: dict[str, Any]) -> None:
    """Gradescope's documented results.json: the top level, and each test."""
    assert isinstance(results["score"], (int, float))
    assert isinstance(results["execution_time"], (int, float)) and results["execution_time"] >= 0
    assert isinstance(results["output"], str) and results["output"]
    assert results["visibility"] in VISIBILITIES and results["stdout_visibility"] in VISIBILITIES
    assert isinstance(results["tests"], list)
    for number, test in enumerate(results["tests"]):
        assert set(test) >= {"score", "max_score", "status", "name", "number", "output", "tags", "visibility"}, test
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert 0 <= test["score"] <= test["max_score"], test
        assert test["status"] in ("passed", "failed") and test["visibility"] in VISIBILITIES
        assert isinstance(test["name"], str) and isinstance(test["number"], str) and test["number"], (number, test)
        assert isinstance(test["output"], str) and isinstance(test["tags"], list)
    if results["tests"]:
        assert abs(results["score"] - sum(t["score"] for t in results["tests"])) < 1e-6


def _notebook(*sources: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    return nbformat.writes(nb)


def test_the_zip_holds_the_course_and_no_solution(gradescope: Gradescope) -> None:
    source = gradescope.root / "source"
    assert os.access(source / "setup.sh", os.X_OK) and os.access(source / "run_autograder", os.X_OK)
    assert (source / "course.yaml").is_file() and not (source / "solutions").exists()
    hidden = [c for c in COURSE.checks if c.visibility == "hidden"]
    assert hidden and all((source / "grader" / "checks" / c.module / c.test_file.name).is_file() for c in hidden)
    bodies = [ex.solution.read_text(encoding="utf-8").strip() for ex in COURSE.exercises if ex.solution]
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in source.rglob("*") if p.is_file()]
    assert not any(body in text for body in bodies for text in texts)
    assert "solution" not in (source / "course.yaml").read_text(encoding="utf-8")
    # Pinned to what this grader was tested with; torch as the CPU build unless --gpu.
    pins = (source / "requirements.txt").read_text(encoding="utf-8")
    assert f"torch=={version('torch').split('+')[0]}\n" in pins and f"pyyaml=={version('pyyaml')}" in pins
    assert set(pinned_requirements()) <= set(pins.splitlines())
    assert "https://download.pytorch.org/whl/cpu" in (source / "setup.sh").read_text(encoding="utf-8")


def test_setup_installs_the_grader_from_the_zip(gradescope: Gradescope) -> None:
    probe = "import grader, sys; print(grader.__file__)"
    proc = subprocess.run([str(gradescope.venv / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                          cwd=gradescope.root, env=_clean_env(), timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    installed = Path(proc.stdout.strip())
    assert installed.is_relative_to(gradescope.venv) and not installed.is_relative_to(ROOT)


def test_a_correct_submission_in_a_nested_folder_gets_every_point(gradescope: Gradescope) -> None:
    files = {f"lesson14-main/{ex.module}.py": solution_text(ex.id) for ex in COURSE.exercises}
    files["lesson14-main/README.md"] = "my work\n"
    results, stdout = _autograde(gradescope, files)
    assert results["score"] == 100.0 and len(results["tests"]) == len(COURSE.checks)
    visibility = {t["name"]: t["visibility"] for t in results["tests"]}
    assert {visibility[c.id] for c in COURSE.checks if c.visibility == "hidden"} == {"after_published"}
    assert {visibility[c.id] for c in COURSE.checks if c.visibility == "public"} == {"visible"}
    assert results["stdout_visibility"] == "hidden"  # course.yaml's gradescope.stdout_visibility
    assert "OOM after" in stdout  # what the learner's code printed goes to run_autograder's stdout
    assert (gradescope.root / "results" / "report.yaml").is_file()


def test_a_wrong_notebook_is_graded_with_messages_and_hints(gradescope: Gradescope) -> None:
    wrong_roundtrip = "def roundtrip(x, device):\n    return (x.to(device) * 2).cpu()\n"
    results, _ = _autograde(gradescope, {"bai14.ipynb": _notebook("!nvidia-smi", "import torch", wrong_roundtrip,
                                                                  solution_text("ex1"))})
    tests = {t["name"]: t for t in results["tests"]}
    assert 0 < results["score"] < 100
    assert all(tests[c.id]["status"] == "passed" for c in COURSE.checks if c.exercise == "ex1")
    wrong = tests["ex3.roundtrip_values"]
    assert wrong["status"] == "failed" and wrong["score"] == 0
    assert f"{texts.ui('vi', 'hint')}: " in wrong["output"]  # the course's language
    assert all(len(t["output"]) <= 3100 for t in results["tests"])


def test_an_empty_submission_gets_a_page_that_says_so(gradescope: Gradescope) -> None:
    results, _ = _autograde(gradescope, {"notes.txt": "I could not finish\n"})
    assert results["score"] == 0.0
    assert results["output"].startswith(texts.ui("vi", "gradescope.nothing_submitted"))
    assert len(results["tests"]) == len(COURSE.checks)


def test_a_broken_grader_still_gives_a_valid_page(gradescope: Gradescope, tmp_path: Path) -> None:
    results, _ = _autograde(gradescope, {"ex1_device.py": solution_text("ex1")}, venv=tmp_path / "no-venv")
    assert results["score"] == 0.0 and results["tests"] == []
    assert "run_autograder: the grader did not start" in results["output"]

    course = gradescope.root / "source" / "course.yaml"
    kept = course.read_text(encoding="utf-8")
    try:
        course.write_text(kept.replace("default_lang: vi", "default_lang: fr"), encoding="utf-8")
        results, _ = _autograde(gradescope, {"ex1_device.py": solution_text("ex1")})
    finally:
        course.write_text(kept, encoding="utf-8")
    assert results["score"] == 0.0 and "default_lang" in results["output"]
    assert results["output"].startswith(texts.ui("vi", "gradescope.unavailable").split("(")[0])
