"""Every correct style gets full marks; the stubs get zero with every exercise not attempted."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import MODULES, SOLUTIONS, STUBS, Graded, run_cli, windows_1258
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


def test_a_file_in_the_code_page_its_coding_line_names_grades_like_its_utf8_original(
        tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    """A learner's editor on Windows saves Vietnamese in code page 1258, and the file says so on its
    first line (PEP 263): Python runs it as written, and so does the grader (it refused it as "not
    UTF-8 text"). The same bytes without the coding line are refused, as Python refuses them."""
    folder = tmp_path / "windows_editor"
    folder.mkdir()
    def solution(module: str) -> str:  # (its arrows are not in the code page)
        return (SOLUTIONS / f"{module}.py").read_text(encoding="utf-8").replace("→", "->")

    declared = "# -*- coding: cp1258 -*-\n# Bài tập 1: kiểm tra thiết bị\n" + solution("ex1_device")
    undeclared = "# Bài tập 3: chuyển tensor\n" + solution("ex3_roundtrip")
    (folder / "ex1_device.py").write_bytes(windows_1258(declared))
    (folder / "ex3_roundtrip.py").write_bytes(windows_1258(undeclared))
    graded = grade_forked(folder)
    assert graded.code == 0 and graded.report is not None, graded.stderr
    assert graded.exercise("ex1")["status"] == "passed", graded.exercise("ex1")["checks"]
    ex3 = graded.exercise("ex3")
    assert ex3["status"] == "error" and "UTF-8" in ex3["checks"][0]["message"], ex3


def test_the_multiple_choice_answer_in_the_forms_learners_write_it(
        tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    """The stub lists its options as "B) …": an answer that copies the option line, brackets its letter or says it
    in a sentence names B and gets the check's points (it was "must be one letter", 3 points lost). One that names
    two choices is no answer, and "A) …" is still A."""
    from grader.checks.ex2_timing.test_small_n_answer import chosen  # noqa: PLC0415 - the check's own reader

    option = "B) kernel-launch and host↔device transfer overhead dominate such a small amount of work"
    for answer in ("B", " b ", "(B)", "b)", "B.", option, "b) overhead khởi chạy kernel và truyền dữ liệu host↔device",
                   "Đáp án: B", "Answer: B"):
        assert chosen(answer) == "B", answer
    for answer in ("B or C", "ABCD", "A B", "Bx", "overhead", "B1"):
        assert chosen(answer) is None, answer
    assert chosen("A) each GPU core is slower than a CPU core") == "A"

    graded = {}
    for name, answer in (("option_line", option), ("two_choices", "B or C")):
        text = (SOLUTIONS / "ex2_timing.py").read_text(encoding="utf-8").replace(
            'SMALL_N_ANSWER = "B"', f"SMALL_N_ANSWER = {answer!r}")
        assert answer in text
        folder = tmp_path / name
        folder.mkdir()
        (folder / "ex2_timing.py").write_text(text, encoding="utf-8")
        graded[name] = grade_forked(folder)
    assert graded["option_line"].check("ex2.small_n_answer")["status"] == "passed"
    check = graded["two_choices"].check("ex2.small_n_answer")
    assert check["status"] == "failed" and "must be one letter" in check["message"], check


def test_a_cpu_named_by_platform_processor_has_a_name_on_every_grading_host(
        tmp_path: Path, grade_forked: Callable[..., Graded], monkeypatch: pytest.MonkeyPatch) -> None:
    """``describe_device(cpu)`` named by ``platform.processor()``: "x86_64" on Colab's and Kaggle's Ubuntu, "arm" on
    a Mac, but "" where the grading host's ``uname -p`` says "unknown" (Debian, this project's machines), which lost
    ex1.describe_device_cpu. The learner process answers the architecture there, as Ubuntu does."""
    import platform  # noqa: PLC0415

    from grader.learner.sessions import name_the_processor  # noqa: PLC0415

    debian = platform.uname_result("Linux", "host", "6.1", "#1 SMP", "x86_64")
    vars(debian)["processor"] = ""  # what `uname -p` = "unknown" gives
    monkeypatch.setattr(platform, "_uname_cache", debian)
    assert platform.processor() == ""
    name_the_processor()
    assert platform.processor() == "x86_64"
    monkeypatch.undo()

    text = (SOLUTIONS / "ex1_device.py").read_text(encoding="utf-8")
    named = 'platform.processor() or platform.machine() or "cpu"'
    assert named in text
    folder = tmp_path / "processor_name"
    folder.mkdir()
    (folder / "ex1_device.py").write_text(text.replace(named, "platform.processor()"), encoding="utf-8")
    graded = grade_forked(folder)
    assert graded.check("ex1.describe_device_cpu")["status"] == "passed", graded.check("ex1.describe_device_cpu")
