"""Every learner-facing text exists in Vietnamese and English, and every id the code uses is in both."""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from grader.course import LANGS, load_course
from grader.errors import GraderFailureKind
from grader.results import CheckStatus, ExerciseStatus
from grader.submission import ProblemKind
from grader.toplevel import STOP_KINDS
from tests.conftest import ROOT

GRADER = ROOT / "grader"
CATALOGS = {lang: yaml.safe_load((GRADER / "messages" / f"{lang}.yaml").read_text(encoding="utf-8")) for lang in LANGS}
SECTIONS = ("messages", "hints", "ui")
UI_KEY = re.compile(r"^(selfcheck|notebook)\.(?!ipynb$)[a-z_]+$")  # not the file name notebook.ipynb


def calls(path: Path) -> Iterator[ast.Call]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Call):
            yield node


def name_of(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def literal(call: ast.Call, index: int, keyword: str = "") -> str | None:
    node: Any = call.args[index] if len(call.args) > index else next(
        (k.value for k in call.keywords if k.arg == keyword), None)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def fail_ids() -> dict[str, str]:
    """Message id -> where: every ``fail("<id>", ...)`` in the checks (docstrings do not count)."""
    found = {}
    for path in sorted((GRADER / "checks").rglob("*.py")):
        for call in calls(path):
            if name_of(call) == "fail" and (message_id := literal(call, 0, "message_id")):
                found[message_id] = f"{path.relative_to(ROOT)}:{call.lineno}"
    return found


def runtime_ids() -> dict[str, str]:
    """Message ids the grader itself reports: CheckOutcome(..., "<id>"), {"message": "<id>"}, load_<kind>."""
    found = {f"load_{kind}": "grader/scoring.py" for kind in get_args(ProblemKind)}
    found |= {f"top_level.{kind}": "grader/scoring.py" for kind in (*STOP_KINDS, "kept")}
    found |= {f"grader_error.{kind}": "grader/scoring.py" for kind in get_args(GraderFailureKind)}
    found |= {"function_not_defined": "grader/scoring.py", "not_graded": "grader/scoring.py"}
    for path in sorted(GRADER.glob("*.py")):
        for call in calls(path):
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            message_id = (literal(call, 2, "message_id") if name_of(call) == "CheckOutcome"
                          else literal(call, 1, "message_id") if name_of(call) == "charge_rest" else None)
            if message_id:
                found[message_id] = where
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if (isinstance(key, ast.Constant) and key.value == "message" and isinstance(value, ast.Constant)
                            and isinstance(value.value, str) and value.value):
                        found[value.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def ui_keys() -> dict[str, str]:
    """ui keys the grader's modules name: in ui() calls, as "selfcheck.*" / "notebook.*" strings, statuses."""
    found = {f"status.{s}": "grader/results.py" for s in {*get_args(CheckStatus), *get_args(ExerciseStatus)}}
    for path in sorted(GRADER.glob("*.py")):
        for call in calls(path):
            if name_of(call) in ("ui", "_ui") and (key := literal(call, 1)):
                found[key] = f"{path.relative_to(ROOT)}:{call.lineno}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and UI_KEY.match(node.value):
                found.setdefault(node.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def test_languages_have_the_same_keys() -> None:
    for lang in LANGS:
        assert set(CATALOGS[lang]) == set(SECTIONS), lang
    vi, en = CATALOGS["vi"], CATALOGS["en"]
    for section in SECTIONS:
        assert sorted(set(vi[section]) - set(en[section])) == [], f"{section}: only in vi.yaml"
        assert sorted(set(en[section]) - set(vi[section])) == [], f"{section}: only in en.yaml"


@pytest.mark.parametrize("section", SECTIONS)
def test_texts_are_filled_and_use_the_same_placeholders(section: str) -> None:
    vi, en = CATALOGS["vi"][section], CATALOGS["en"][section]
    for key in set(vi) & set(en):
        assert isinstance(vi[key], str) and vi[key].strip(), f"vi.yaml {section}.{key} is empty"
        assert isinstance(en[key], str) and en[key].strip(), f"en.yaml {section}.{key} is empty"
        assert placeholders(vi[key]) == placeholders(en[key]), f"{section}.{key}: placeholders differ"


@pytest.mark.parametrize("lang", LANGS)
def test_every_check_failure_has_a_message(lang: str) -> None:
    missing = {i: where for i, where in fail_ids().items() if i not in CATALOGS[lang]["messages"]}
    assert missing == {}, f"fail() ids missing from {lang}.yaml"


@pytest.mark.parametrize("lang", LANGS)
def test_every_grader_outcome_has_a_message(lang: str) -> None:
    found = runtime_ids()
    assert {"learner_raised", "check_timeout", "not_attempted", "absent", "top_level.no_gpu"} <= set(found)
    missing = {i: where for i, where in found.items() if i not in CATALOGS[lang]["messages"]}
    assert missing == {}, f"message ids missing from {lang}.yaml"


@pytest.mark.parametrize("lang", LANGS)
def test_every_ui_text_exists(lang: str) -> None:
    missing = {key: where for key, where in ui_keys().items() if key not in CATALOGS[lang]["ui"]}
    assert missing == {}, f"ui keys missing from {lang}.yaml"


@pytest.mark.parametrize("lang", LANGS)
def test_every_check_has_a_hint(lang: str) -> None:
    checks = {c.id for c in load_course().checks}
    hints = set(CATALOGS[lang]["hints"])
    assert sorted(checks - hints) == [], f"checks without a hint in {lang}.yaml"
    assert sorted(hints - checks) == [], f"hints in {lang}.yaml for checks course.yaml does not declare"
