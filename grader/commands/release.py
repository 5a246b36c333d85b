"""The learner bundle: ``grader release -o DIR``.

DIR gets what a learner needs to do the lesson and self-check it, and nothing that gives the
graded answers away:

- ``exercises/`` the stubs and ``notebooks/`` the exercise notebooks (grader/commands/notebooks.py);
- ``grader/`` the package with the public checks only: each check is its own module, holding its
  hint and messages, so the bundle ships the public checks' modules and the helpers they import,
  and no hidden check's code or text at all;
- ``grader/course.yaml`` the course with ``release: public``: hidden checks and solution paths
  removed, so its points add up to the public total. It sits inside the package so that a
  pip-installed grader (Colab, Kaggle) finds it too;
- ``pyproject.toml`` (pip-installable: ``%pip install "git+<the bundle's repository>"``) and
  ``README.md`` (docs/learners.md).

The instructor's repository (solutions, hidden checks, tests) stays the instructor's. Before
returning, the bundle is checked: its grader loads its own course in a fresh interpreter, and
no hidden check id or hidden check module is anywhere in it; otherwise DIR is removed.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import yamltext
from grader.commands.notebooks import INSTALL_URL, write_notebooks
from grader.course import Course
from grader.errors import GraderError
from grader.paths import CHECKS_DIR, PACKAGE_DIR

_HEADER = """\
# Lesson 14 — the learner's copy of course.yaml, written by `grader release`; do not edit.
# release: public — hidden checks and solutions are not part of this copy, so the points
# add up to the public total. The full course stays with the instructor.
"""


@dataclass(frozen=True)
class Bundle:
    path: Path
    files: int
    exercises: tuple[str, ...]
    public_checks: int


def build(course: Course, out: Path, *, install_url: str = INSTALL_URL) -> Bundle:
    if course.release is not None:
        raise GraderError(f"{course.path} is already a learner's copy (release: public); release the full course")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise GraderError(f"{out} exists and is not an empty folder; choose a new one")
    root = course.path.parent
    sources = {name: root / name for name in ("pyproject.toml", "docs/learners.md")}
    for name, path in sources.items():
        if not path.is_file():
            raise GraderError(f"{path} is missing: the bundle needs {name}")
    out.mkdir(parents=True, exist_ok=True)
    try:
        package = out / "grader"
        _copy_package(package, {c.test_file.name for c in course.checks if c.visibility == "public"})
        hidden = {c.id for c in course.checks if c.visibility == "hidden"}
        (package / "course.yaml").write_text(_HEADER + released_course_yaml(course), encoding="utf-8")
        (out / "exercises").mkdir()
        for ex in course.exercises:
            if ex.stub is not None:
                shutil.copy2(ex.stub, out / "exercises" / ex.stub.name)
        write_notebooks(course, out / "notebooks", install_url=install_url)
        shutil.copy2(sources["pyproject.toml"], out / "pyproject.toml")
        readme = sources["docs/learners.md"].read_text(encoding="utf-8")
        (out / "README.md").write_text(readme.replace(f'"{INSTALL_URL}"', f'"{install_url}"'), encoding="utf-8")
        (out / ".gitignore").write_text("__pycache__/\n*.egg-info/\nbuild/\n", encoding="utf-8")
        _verify(out, course, hidden)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    files = sum(1 for p in out.rglob("*") if p.is_file())
    public = sum(1 for c in course.checks if c.visibility == "public")
    return Bundle(out, files, course.exercise_ids, public)


def released_course_yaml(course: Course) -> str:
    """course.yaml without hidden checks, solution paths, stub paths or instructor settings."""
    raw: dict[str, Any] = yamltext.load(course.path.read_text(encoding="utf-8"))
    released: dict[str, Any] = {key: raw[key] for key in ("title", "default_lang", "defaults", "limits", "lanes")
                                 if key in raw}
    released["release"] = "public"
    released["exercises"] = [
        {
            **{key: ex[key] for key in ("id", "module", "title", "functions") if key in ex},
            "checks": [c for c in ex["checks"] if c.get("visibility", "public") == "public"],
        }
        for ex in raw["exercises"]
    ]
    return yamltext.dump(released)


def _kept_check_files(exercise_dir: Path, public: set[str]) -> set[str]:
    """The public checks' modules, __init__.py and the helper modules they import (transitively)."""
    module_prefix = f"grader.checks.{exercise_dir.name}."
    kept = {"__init__.py"} | {name for name in public if (exercise_dir / name).is_file()}
    todo = sorted(kept)
    while todo:
        tree = ast.parse((exercise_dir / todo.pop()).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.startswith(module_prefix):
                    file = f"{name[len(module_prefix):].split('.')[0]}.py"
                    if file not in kept and (exercise_dir / file).is_file():
                        kept.add(file)
                        todo.append(file)
    return kept


def _copy_package(target: Path, public: set[str]) -> None:
    """The package, with only the public checks' modules and what they import in each exercise."""
    exercise_dirs = {p.resolve() for p in CHECKS_DIR.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
                     and p.name != "support"}
    kept = {d: _kept_check_files(d, public) for d in exercise_dirs}

    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder).resolve()
        skipped = {n for n in names if n in ("__pycache__", ".pytest_cache", "course.yaml")}
        skipped |= {n for n in names if n.endswith(".pyc")}
        if here in kept:
            skipped |= {n for n in names if n.endswith(".py") and n not in kept[here]}
        return skipped

    shutil.copytree(PACKAGE_DIR, target, ignore=ignore)


def _leaks(out: Path, hidden: Iterable[str]) -> list[str]:
    needles = {needle for check_id in hidden for needle in (check_id, f"test_{check_id.split('.', 1)[1]}")}
    found = []
    for path in sorted(out.rglob("*")):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            found += [f"{path.relative_to(out)}: {n}" for n in sorted(needles) if n in text]
    return found


def _verify(out: Path, course: Course, hidden: set[str]) -> None:
    leaks = _leaks(out, hidden)
    if leaks:
        raise GraderError("the bundle would give hidden checks away: " + "; ".join(leaks[:5]))
    # A fresh interpreter on the bundle alone: its course.yaml must load with its own checks.
    env = {**os.environ, "PYTHONPATH": str(out), "PYTHONDONTWRITEBYTECODE": "1"}
    probe = "from grader.course import load_course; c = load_course(); print(c.release, len(c.checks))"
    proc = subprocess.run([sys.executable, "-c", probe], cwd=out, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    public = sum(1 for c in course.checks if c.visibility == "public")
    if proc.returncode != 0 or proc.stdout.split() != ["public", str(public)]:
        raise GraderError(f"the bundle's course.yaml does not load: {(proc.stderr or proc.stdout).strip()[-500:]}")
