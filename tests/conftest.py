"""Run the grader for real: the ``grader`` CLI in a subprocess, on files in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.submissions.catalog import MODULES, ROOT

SOLUTIONS = ROOT / "solutions"
STUBS = ROOT / "exercises"


@dataclass(frozen=True)
class Graded:
    code: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None

    def exercise(self, ex_id: str) -> dict[str, Any]:
        assert self.report is not None, self.stderr
        return self.report["exercises"][ex_id]  # type: ignore[no-any-return]

    def check(self, check_id: str) -> dict[str, Any]:
        for check in self.exercise(check_id.split(".", maxsplit=1)[0])["checks"]:
            if check["id"] == check_id:
                return check  # type: ignore[no-any-return]
        raise KeyError(check_id)

    def lost(self, ex_id: str) -> set[str]:
        return {c["id"] for c in self.exercise(ex_id)["checks"] if c["status"] != "passed"}


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 600,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, check=False,
                          cwd=cwd or ROOT, env=env, timeout=timeout)


@pytest.fixture
def grade(tmp_path: Path) -> Callable[..., Graded]:
    def run(submission: Path, *extra: str, env: dict[str, str] | None = None) -> Graded:
        out = tmp_path / "reports" / f"{submission.stem}-{len(list(tmp_path.glob('reports/*')))}.yaml"
        proc = run_cli("grade", str(submission), "-o", str(out), "--lang", "en", *extra, env=env)
        report = yaml.safe_load(out.read_text(encoding="utf-8")) if out.exists() else None
        return Graded(proc.returncode, proc.stdout, proc.stderr, report)

    return run


@pytest.fixture
def batch_one(tmp_path: Path) -> Callable[..., Graded]:
    """``grader batch`` on a class of one: its children are forked from a fork server."""
    def run(submission: Path, *extra: str, env: dict[str, str] | None = None) -> Graded:
        out = tmp_path / "batch-reports"
        proc = run_cli("batch", str(submission.parent), "-o", str(out), "--lang", "en", "--workers", "1", *extra,
                       env=env)
        path = out / f"{submission.name}.yaml"
        report = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
        return Graded(proc.returncode, proc.stdout, proc.stderr, report)

    return run


def folder_with(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    """A submission folder in tmp_path holding the given exercise files (module -> text)."""
    folder = tmp_path / name
    folder.mkdir(parents=True)
    for module, text in files.items():
        (folder / f"{module}.py").write_text(text, encoding="utf-8")
    return folder


def copy_solutions(tmp_path: Path, name: str, *, only: tuple[str, ...] | None = None) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    for ex_id, module in MODULES.items():
        if only is None or ex_id in only:
            shutil.copy(SOLUTIONS / f"{module}.py", folder / f"{module}.py")
    return folder


def solution_text(ex_id: str) -> str:
    return (SOLUTIONS / f"{MODULES[ex_id]}.py").read_text(encoding="utf-8")


def course_with(tmp_path: Path, replacements: dict[str, str]) -> Path:
    """A copy of course.yaml in tmp_path with some lines changed (limits, timeouts)."""
    text = (ROOT / "course.yaml").read_text(encoding="utf-8")
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    for name in ("exercises", "solutions"):
        link = tmp_path / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    course = tmp_path / "course.yaml"
    course.write_text(text, encoding="utf-8")
    return course
