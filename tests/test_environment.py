"""The grader's own environment: every import declared, and a broken install blamed on the grader.

A fresh venv holds only what pyproject.toml declares; the machine's own Python may hold more
(numpy, say) and hide a missing declaration. So the declarations are checked from the source,
and a broken check module is tested for real, in a temporary copy of the grader.
"""

from __future__ import annotations

import ast
import csv
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT, run_cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# Imported only where they are already present (never installed for the grader):
OPTIONAL = {
    "IPython": "grader/commands/selfcheck.py imports it only inside a running IPython kernel",
}


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].strip().lower().replace("_", "-") for req in requirements}


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return _requirement_names(project["dependencies"]), _requirement_names(project["optional-dependencies"]["test"])


def _top_level_imports(folder: Path) -> dict[str, str]:
    """Top-level module name -> the first file importing it."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        if {"submissions", "learners"} & set(path.parts):  # learners' code, not the grader's
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if (path.parent / f"{top}.py").is_file():  # a script's sibling module, not a package
                    continue
                found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def _undeclared(folder: Path, allowed: set[str], optional: dict[str, str] | None = None) -> list[str]:
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module, where in _top_level_imports(folder).items():
        if module in sys.stdlib_module_names or module in ("grader", "tests", "__future__", *(optional or {})):
            continue
        # Not installed here (tomli on Python >= 3.11): the distribution shares the module's name.
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not dists & allowed:
            missing.append(f"{module} (imported by {where}; installed as {sorted(dists) or 'nothing'})")
    return missing


def test_every_package_the_grader_imports_is_declared() -> None:
    runtime, _ = _declared()
    # pytest-timeout is loaded by name (-p pytest_timeout), never imported.
    assert "pytest-timeout" in runtime
    assert _undeclared(ROOT / "grader", runtime, OPTIONAL) == []


def test_every_package_the_tests_and_benchmarks_import_is_declared() -> None:
    runtime, test = _declared()
    assert _undeclared(ROOT / "tests", runtime | test) == []
    assert _undeclared(ROOT / "benchmarks", runtime | test) == []


def _grader_copy(tmp_path: Path) -> Path:
    """A copy of the grader and its course, with which one can break things on purpose."""
    copy = tmp_path / "install"
    shutil.copytree(ROOT / "grader", copy / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("exercises", "solutions"):
        shutil.copytree(ROOT / name, copy / name)
    shutil.copy(ROOT / "course.yaml", copy / "course.yaml")
    return copy


def _break_a_check(copy: Path) -> Path:
    check = copy / "grader" / "checks" / "ex3_roundtrip" / "test_roundtrip_values.py"
    text = check.read_text(encoding="utf-8")
    future = "from __future__ import annotations\n"
    check.write_text(text.replace(future, future + "import numpy_is_not_installed  # noqa\n"), encoding="utf-8")
    return check


def _run(copy: Path, *args: str) -> tuple[int, str, str]:
    proc = run_cli(*args, cwd=copy, env={"PYTHONPATH": str(copy)})
    return proc.returncode, proc.stdout, proc.stderr


def test_a_check_that_does_not_import_is_the_graders_failure(tmp_path: Path) -> None:
    copy = _grader_copy(tmp_path)
    _break_a_check(copy)
    out = tmp_path / "report.yaml"
    code, stdout, stderr = _run(copy, "grade", str(copy / "solutions"), "-o", str(out), "--lang", "en")
    assert code == 3, (stdout, stderr)
    assert "Traceback" not in stderr
    report = yaml.safe_load(out.read_text(encoding="utf-8"))
    reason = report["grader_error"]
    assert "\n" not in reason
    assert reason.startswith("the grader's checks could not be loaded: ModuleNotFoundError: "
                             "No module named 'numpy_is_not_installed'"), reason
    assert "reinstall the grader" in reason
    assert "tampering" not in report["notes"]
    assert report["notes"] == ["grader_failed"]
    # No verdict on the learner's code: every check skipped, saying why, none failed or errored.
    checks = [c for ex in report["exercises"].values() for c in ex["checks"]]
    assert {c["status"] for c in checks} == {"skipped"}
    assert all(c["points"] == 0 and "could not run the checks" in c["message"] and not c.get("hint") for c in checks)
    # Lines holding text the grader did not write are wrapped to the terminal (grader/outputs/terminal.py).
    assert "Not graded" in stdout and " ".join(reason.split()) in " ".join(stdout.split())
    # The same in Vietnamese.
    out_vi = tmp_path / "report-vi.yaml"
    assert _run(copy, "grade", str(copy / "solutions"), "-o", str(out_vi))[0] == 3
    vi = yaml.safe_load(out_vi.read_text(encoding="utf-8"))
    assert vi["grader_error"].startswith("không nạp được các check của grader"), vi["grader_error"]


def test_batch_marks_grader_failures_and_regrades_them_once_fixed(tmp_path: Path) -> None:
    copy = _grader_copy(tmp_path)
    check = _break_a_check(copy)
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copytree(copy / "solutions", subs / "alice")
    shutil.copytree(copy / "exercises", subs / "bob")
    out = tmp_path / "grades"
    code, stdout, stderr = _run(copy, "batch", str(subs), "-o", str(out), "--quiet")
    assert code == 3, (stdout, stderr)
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as book:
        rows = list(csv.DictReader(book))
    assert [(r["learner"], r["score"], r["status"]) for r in rows] == [("alice", "", "grader_error"),
                                                                       ("bob", "", "grader_error")]
    summary = yaml.safe_load((out / "summary.yaml").read_text(encoding="utf-8"))
    assert [entry["learner"] for entry in summary["not_graded"]] == ["alice", "bob"]
    assert summary["learners"] == 0  # left out of the figures
    # The summary speaks the batch's language: the course's default, Vietnamese.
    assert "Chưa chấm được: trình chấm gặp lỗi (2)" in (out / "summary.html").read_text(encoding="utf-8")

    # Fixed: the next run regrades both, although their submissions did not change.
    check.write_text(check.read_text(encoding="utf-8").replace("import numpy_is_not_installed  # noqa\n", ""),
                     encoding="utf-8")
    code, stdout, stderr = _run(copy, "batch", str(subs), "-o", str(out))
    assert code == 0, (stdout, stderr)
    assert "2 graded, 0 already up to date, 0 grader failures" in stdout
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as book:
        rows = list(csv.DictReader(book))
    assert [(r["learner"], r["score"], r["status"]) for r in rows] == [("alice", "100", "graded"),
                                                                       ("bob", "0", "graded")]
    assert yaml.safe_load((out / "summary.yaml").read_text(encoding="utf-8"))["not_graded"] == []


def test_doctor_names_what_is_broken(tmp_path: Path) -> None:
    """And what only costs time: a copy whose bytecode was never written, in a shell that forbids writing it
    (PYTHONDONTWRITEBYTECODE), is told so with the one command that writes it — which does."""
    copy = _grader_copy(tmp_path)
    no_bytecode = {"PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = run_cli("doctor", cwd=copy, env=no_bytecode)
    code, stdout = proc.returncode, proc.stdout
    assert code == 0, stdout
    for label in ("grader", "python", "package torch", "package numpy", "--device auto", "checks", "bytecode"):
        assert re.search(rf"^  {re.escape(label)}\s", stdout, re.MULTILINE), (label, stdout)
    assert "everything the grader needs works here" in stdout
    told = re.search(r"^  bytecode\s+(\d+) of the grader's (\d+) modules not compiled \(PYTHONDONTWRITEBYTECODE is "
                     r"set\).*`(.+ -m compileall -q .+)` writes them once$", stdout, re.MULTILINE)
    assert told is not None and told[1] == told[2], stdout
    cure = subprocess.run(shlex.split(told[3]), capture_output=True, text=True, check=False,
                          env={**os.environ, **no_bytecode})
    assert cure.returncode == 0, cure.stderr
    _break_a_check(copy)
    proc = run_cli("doctor", cwd=copy, env=no_bytecode)
    code, stdout = proc.returncode, proc.stdout
    assert code == 3
    assert re.search(r"^✗ checks .*ex3_roundtrip.test_roundtrip_values: ModuleNotFoundError: .*numpy_is_not_installed",
                     stdout, re.MULTILINE), stdout
    # Compiled, but for the one check changed since: that one alone is compiled again.
    assert re.search(r"^  bytecode\s+1 of the grader's \d+ modules not compiled", stdout, re.MULTILINE), stdout


def test_version_line() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert re.match(r"grader \d+\.\d+\.\d+ \(python 3\.\d+\.\d+, torch \S+\)", proc.stdout), proc.stdout


def test_the_command_line_leaves_what_it_made_to_the_process_s_end() -> None:
    """The interpreter's last collections walked every object a command made, garbage the process's end frees
    anyway (13-15 ms of a `grader grade`): ``cli`` freezes them as it returns, whatever the command's end."""
    program = ("import gc, sys; from grader.commands.cli import cli; sys.argv = ['grader', 'export', 'canvas', "
               "'no such folder', '-o', 'out.csv']; code = cli(); print(code, gc.get_freeze_count() > 0)")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.stdout.split() == ["2", "True"], (proc.stdout, proc.stderr[-2000:])
    assert "no such folder" in proc.stderr and "Traceback" not in proc.stderr


def test_a_terminal_that_cannot_show_vietnamese_gets_escapes_not_a_traceback(tmp_path: Path) -> None:
    """An instructor's terminal or log in ASCII or Latin-1 (``PYTHONIOENCODING``, a Latin-1 locale): the
    course's Vietnamese summary and a Vietnamese path are written as backslash escapes, and the command
    ends as it would anywhere (it printed a UnicodeEncodeError traceback after grading, exit 1)."""
    learner = tmp_path / "lớp" / "Nguyễn Văn An"
    learner.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / "ex1_device.py", learner / "ex1_device.py")
    report = tmp_path / "điểm.yaml"
    proc = run_cli("grade", str(learner), "-o", str(report), env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "\\u0110i\\u1ec3m: 20.0 / 100.0" in proc.stdout, proc.stdout  # "Điểm", the course's language
    assert yaml.safe_load(report.read_text(encoding="utf-8"))["score"] == 20.0
