"""The learner bundle: what it holds, what it must never hold, and that self-check works from it."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.course import load_course
from grader.score.texts import declared_texts
from tests.conftest import MODULES, ROOT, SOLUTIONS, run_cli, solution_text

COURSE = load_course()
HIDDEN = [c for c in COURSE.checks if c.visibility == "hidden"]
PUBLIC = [c for c in COURSE.checks if c.visibility == "public"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "lesson14"
    proc = run_cli("release", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "no hidden checks, no solutions" in proc.stdout
    return out


def bundle_texts(bundle: Path) -> dict[str, str]:
    return {str(p.relative_to(bundle)): p.read_text(encoding="utf-8") for p in bundle.rglob("*") if p.is_file()}


def run_bundle(bundle: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(bundle)}
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600, check=False)


def test_bundle_layout(bundle: Path) -> None:
    names = set(bundle_texts(bundle))
    for module in MODULES.values():
        assert f"exercises/{module}.py" in names
        assert f"notebooks/{module}.ipynb" in names
    for check in PUBLIC:  # each public check's own module, its texts inside
        assert f"grader/checks/{check.module}/test_{check.name}.py" in names
    assert {"README.md", "pyproject.toml", "grader/course.yaml", "grader/score/texts/vi.yaml"} <= names
    assert (bundle / "README.md").read_text(encoding="utf-8") == (ROOT / "docs/learners.md").read_text(encoding="utf-8")
    for module in MODULES.values():
        stub = ROOT / "exercises" / f"{module}.py"
        assert (bundle / "exercises" / stub.name).read_bytes() == stub.read_bytes()
        notebook = ROOT / "notebooks" / f"{module}.ipynb"
        assert (bundle / "notebooks" / notebook.name).read_bytes() == notebook.read_bytes()


def test_bundle_has_no_hidden_checks(bundle: Path) -> None:
    texts = bundle_texts(bundle)
    assert not [name for name in texts if name.startswith("solutions")]
    for check in HIDDEN:  # no hidden check's module: neither its code nor its texts
        assert f"grader/checks/{check.module}/test_{check.name}.py" not in texts
    needles = {c.id for c in HIDDEN} | {f"test_{c.name}" for c in HIDDEN}
    leaks = [(name, needle) for name, text in texts.items() for needle in needles if needle in text]
    assert leaks == []
    # No text a hidden check alone fails with: every message in the bundle's check modules is used
    # by a module the bundle ships.
    for check in HIDDEN:
        own = set(declared_texts(check.test_file).get("MESSAGES", {}))
        leaked = [(name, m) for name, text in texts.items() for m in own if m in text]
        assert leaked == [], check.id
    # Every message a shipped check can fail with is shipped with it.
    shipped = {m for name in texts if name.startswith("grader/checks/") and name.endswith(".py")
               for m in declared_texts(bundle / name).get("MESSAGES", {})}
    grader_ids = set(yaml.safe_load(texts["grader/score/texts/en.yaml"])["messages"])
    public_fail_ids = {m for name, text in texts.items() if name.startswith("grader/checks/") and name.endswith(".py")
                       for m in fail_ids(text)}
    assert public_fail_ids and public_fail_ids <= shipped | grader_ids


def fail_ids(source: str) -> set[str]:
    """Message ids of the ``fail("<id>", ...)`` calls in a module (docstrings do not count)."""
    return {node.args[0].value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "fail"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


def _function_bodies(path: Path) -> list[tuple[str, str]]:
    """(name, body without docstring, whitespace removed) of each function of a solution file."""
    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            text = "\n".join(ast.get_source_segment(source, stmt) or "" for stmt in body)
            found.append((node.name, re.sub(r"\s+", "", text)))
    return found


def test_bundle_has_no_solutions(bundle: Path) -> None:
    flat = {name: re.sub(r"\s+", "", text) for name, text in bundle_texts(bundle).items()}
    bodies = [(f"{path.name}:{name}", body) for path in sorted(SOLUTIONS.glob("*.py"))
              for name, body in _function_bodies(path)]
    assert bodies
    leaks = [(what, name) for what, body in bodies for name, text in flat.items() if body in text]
    assert leaks == []
    # Each stub still raises NotImplementedError: the learner's work starts from scratch.
    for module in MODULES.values():
        assert "raiseNotImplementedError" in flat[f"exercises/{module}.py"]


def raw_keys(raw: dict[str, Any]) -> set[str]:
    return set(raw) | {key for ex in raw["exercises"] for key in ex}


def test_released_course_yaml(bundle: Path) -> None:
    text = (bundle / "grader" / "course.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    assert raw["release"] == "public"
    assert "solution" not in raw_keys(raw) and "stub" not in raw_keys(raw)
    assert all(c.get("visibility", "public") == "public" for ex in raw["exercises"] for c in ex["checks"])
    assert raw["default_lang"] == COURSE.default_lang
    checks = {f"{ex['id']}.{c['id']}": c["points"] for ex in raw["exercises"] for c in ex["checks"]}
    assert checks == {c.id: c.points for c in PUBLIC}


def test_self_check_from_the_bundle(bundle: Path, tmp_path: Path) -> None:
    """A learner's clone of the bundle: solve ex1 in place, run `python -m grader check ex1` there."""
    learner = tmp_path / "clone"
    shutil.copytree(bundle, learner)
    (learner / "exercises" / "ex1_device.py").write_text(solution_text("ex1"), encoding="utf-8")
    proc = run_bundle(learner, "check", "ex1", "--lang", "en", cwd=learner)
    assert proc.returncode == 0, proc.stderr
    assert "✓ ex1.pick_device_returns_device" in proc.stdout and "✓ ex1.describe_device_keys" in proc.stdout
    assert "Score: 8 / 8" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_pip_installed_bundle_finds_its_course(bundle: Path, tmp_path: Path) -> None:
    """Colab/Kaggle: `%pip install` of the bundle; course.yaml and check files come with the package."""
    source = tmp_path / "source"
    shutil.copytree(bundle, source)  # pip may leave build files in the source folder
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "--target", str(site), str(source)]
    proc = subprocess.run(pip, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    for name in ("course.yaml", "checks/pytest.ini", "score/texts/en.yaml",
                 "checks/ex1_device/test_pick_device_returns_device.py"):
        assert (site / "grader" / name).is_file(), name
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = "from grader.course import load_course; c = load_course(); print(c.release, c.path.parent.name)"
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=elsewhere, env=env,
                          timeout=120, check=False)
    assert proc.stdout.split() == ["public", "grader"], proc.stderr


def test_release_refuses_a_folder_in_use(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine", encoding="utf-8")
    proc = run_cli("release", "-o", str(tmp_path))
    assert proc.returncode == 2
    assert "not an empty folder" in proc.stderr
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "mine"


def test_release_install_url_reaches_the_notebooks(tmp_path: Path) -> None:
    url = "https://example.org/lesson14-learner.zip"
    proc = run_cli("release", "-o", str(tmp_path / "b"), "--install-url", url)
    assert proc.returncode == 0, proc.stderr
    for module in MODULES.values():
        assert f'%pip install -q \\"{url}\\"' in (tmp_path / "b" / "notebooks" / f"{module}.ipynb").read_text("utf-8")
    assert f'%pip install -q "{url}"' in (tmp_path / "b" / "README.md").read_text(encoding="utf-8")
