"""Every learner-facing text exists in Vietnamese and English, and every id the code uses is declared.

Two kinds of text: a check's own (its module's ``HINT`` and ``MESSAGES``, next to the code that
fails with them) and the grader's own (grader/score/texts/{vi,en}.yaml). Both are read here from the
source, as the grader reads them.
"""

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
from grader.intake.submission import ProblemKind
from grader.paths import CHECKS_DIR, TEXTS_DIR
from grader.score.results import ExerciseStatus
from grader.score.texts import check_messages, declared_texts, render
from grader.wire.messages import RUNTIME_MESSAGES, CheckStatus, GraderFailureKind, StopKind
from tests.conftest import ROOT

GRADER = ROOT / "grader"
# The grader's own modules, every layer but the checks (grader/layout.py).
GRADER_MODULES = sorted(p for p in GRADER.rglob("*.py") if p.relative_to(GRADER).parts[0] != "checks")
CATALOGS = {lang: yaml.safe_load((TEXTS_DIR / f"{lang}.yaml").read_text(encoding="utf-8")) for lang in LANGS}
SECTIONS = ("messages", "ui")
UI_KEY = re.compile(r"^(selfcheck|notebook)\.(?!ipynb$)[a-z_]+$")  # not the file name notebook.ipynb
CHECK_MODULES = sorted(CHECKS_DIR.rglob("*.py"))
COURSE_CHECKS = [p for p in CHECK_MODULES if p.name.startswith("test_") and p.parent != CHECKS_DIR]  # not the canary


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


def placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


def exercise_imports(path: Path) -> list[Path]:
    """The modules of the same exercise that a check module imports (its shared messages live there)."""
    prefix = f"grader.checks.{path.parent.name}."
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix):
            found.append(path.parent / f"{node.module[len(prefix):]}.py")  # type: ignore[index]
    return found


def runtime_ids() -> dict[str, str]:
    """Message ids the grader itself reports: the protocol's closed set of runtime messages, and
    the families built from closed sets (load problems, stopped cells, grader failures)."""
    found = {message: "grader/wire/messages.py RuntimeMessage" for message in RUNTIME_MESSAGES}
    found |= {f"load_{kind}": "grader/score/scoring.py" for kind in get_args(ProblemKind)}
    found |= {f"top_level.{kind}": "grader/score/scoring.py" for kind in (*get_args(StopKind), "kept")}
    found |= {f"grader_error.{kind}": "grader/score/scoring.py" for kind in get_args(GraderFailureKind)}
    found |= {"function_not_defined": "grader/score/scoring.py", "not_graded": "grader/score/scoring.py",
              "absent": "grader/score/scoring.py", "absent_others": "grader/score/scoring.py"}
    return found


def used_runtime_ids() -> dict[str, str]:
    """The message ids the grader's modules name in code: CheckOutcome(..., "<id>"), charge_rest's,
    and the judge's ``return "<status>", "<id>", ...`` verdicts."""
    found = {}
    for path in GRADER_MODULES:
        for call in calls(path):
            where = f"{path.relative_to(ROOT)}:{call.lineno}"
            message_id = (literal(call, 2, "message_id") if name_of(call) == "CheckOutcome"
                          else literal(call, 1, "message_id") if name_of(call) == "charge_rest" else None)
            if message_id:
                found[message_id] = where
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 3
                    and all(isinstance(e, ast.Constant) for e in node.value.elts[:2])
                    and node.value.elts[0].value in get_args(CheckStatus) and node.value.elts[1].value):  # type: ignore[attr-defined]
                found[node.value.elts[1].value] = f"{path.relative_to(ROOT)}:{node.lineno}"  # type: ignore[attr-defined]
    return found


def test_every_runtime_message_the_grader_uses_is_in_the_closed_set() -> None:
    known = runtime_ids()
    unknown = {mid: where for mid, where in used_runtime_ids().items() if mid not in known}
    assert unknown == {}, "add these to grader/wire/messages.py RuntimeMessage (and both catalogs)"
    assert len(used_runtime_ids()) > 10  # the scan finds what it looks for
    constants = {node.value for path in GRADER_MODULES if path != GRADER / "wire" / "messages.py"
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert sorted(set(RUNTIME_MESSAGES) - constants) == [], "runtime messages no code uses"


def ui_keys() -> dict[str, str]:
    """ui keys the grader's modules name: in ui() calls, as "selfcheck.*" / "notebook.*" strings, statuses."""
    found = {f"status.{s}": "grader/score/results.py" for s in {*get_args(CheckStatus), *get_args(ExerciseStatus)}}
    for path in GRADER_MODULES:
        for call in calls(path):
            if name_of(call) in ("ui", "_ui") and (key := literal(call, 1)):
                found[key] = f"{path.relative_to(ROOT)}:{call.lineno}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and UI_KEY.match(node.value):
                found.setdefault(node.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_grader_catalogs_have_the_same_keys() -> None:
    for lang in LANGS:
        assert set(CATALOGS[lang]) == set(SECTIONS), lang
    vi, en = CATALOGS["vi"], CATALOGS["en"]
    for section in SECTIONS:
        assert sorted(set(vi[section]) - set(en[section])) == [], f"{section}: only in vi.yaml"
        assert sorted(set(en[section]) - set(vi[section])) == [], f"{section}: only in en.yaml"


@pytest.mark.parametrize("section", SECTIONS)
def test_grader_texts_are_filled_and_use_the_same_placeholders(section: str) -> None:
    vi, en = CATALOGS["vi"][section], CATALOGS["en"][section]
    for key in set(vi) & set(en):
        assert isinstance(vi[key], str) and vi[key].strip(), f"vi.yaml {section}.{key} is empty"
        assert isinstance(en[key], str) and en[key].strip(), f"en.yaml {section}.{key} is empty"
        assert placeholders(vi[key]) == placeholders(en[key]), f"{section}.{key}: placeholders differ"


@pytest.mark.parametrize("path", CHECK_MODULES, ids=lambda p: str(p.relative_to(CHECKS_DIR)))
def test_a_check_modules_texts_are_in_both_languages(path: Path) -> None:
    declared = declared_texts(path)
    texts = [("HINT", declared["HINT"])] if "HINT" in declared else []
    texts += list(declared.get("MESSAGES", {}).items())
    for key, text in texts:
        assert set(text) == set(LANGS), f"{path.name} {key}: languages {sorted(text)}"
        assert all(isinstance(text[lang], str) and text[lang].strip() for lang in LANGS), f"{path.name} {key}"
        assert placeholders(text["vi"]) == placeholders(text["en"]), f"{path.name} {key}: placeholders differ"
    if path in COURSE_CHECKS:
        assert "HINT" in declared, f"{path.name} declares no HINT"


@pytest.mark.parametrize("path", COURSE_CHECKS, ids=lambda p: str(p.relative_to(CHECKS_DIR)))
def test_a_check_fails_only_with_messages_it_or_its_helpers_declare(path: Path) -> None:
    """So a learner's bundle, which ships a public check with exactly what it imports, has its texts."""
    available = set(CATALOGS["en"]["messages"])
    for module in (path, *exercise_imports(path)):
        available |= set(declared_texts(module).get("MESSAGES", {}))
    for module in (path, *exercise_imports(path)):
        for call in calls(module):
            if name_of(call) in ("fail", "Tampered"):
                message_id = literal(call, 0, "message_id")
                assert message_id is not None, f"{module.name}:{call.lineno}: {name_of(call)}() with a computed id"
                assert message_id in available, f"{module.name}:{call.lineno}: {message_id} is not declared"


def tampered_calls() -> Iterator[tuple[str, str, set[str]]]:
    """Every ``Tampered("<id>", name=...)`` of the grader's code and the checks: where, the id, its keywords."""
    for path in sorted(GRADER.rglob("*.py")):
        for call in calls(path):
            if name_of(call) == "Tampered":
                where = f"{path.relative_to(ROOT)}:{call.lineno}"
                message_id = literal(call, 0)
                assert message_id is not None, f"{where}: Tampered() with a computed id"
                yield where, message_id, {k.arg for k in call.keywords if k.arg}


@pytest.mark.parametrize("lang", LANGS)
def test_what_a_tampered_figure_says_is_declared_with_the_placeholders_it_is_given(lang: str) -> None:
    """What cannot be true is a text of its own in each language (grader/judge/outcomes.py Tampered), the
    ``{what}`` of ``tampered_figure``; the judge's in the catalogs, a check's in its exercise's MESSAGES."""
    found = list(tampered_calls())
    assert len(found) >= 15  # the scan finds what it looks for
    for where, message_id, given in found:
        template = CATALOGS[lang]["messages"].get(message_id) or check_messages().get(message_id, {}).get(lang)
        assert template is not None, f"{where}: {message_id} is not declared"
        assert placeholders(template) == given, f"{where}: {message_id} takes {sorted(placeholders(template))}"


@pytest.mark.parametrize("lang", LANGS)
def test_a_tampered_figure_says_what_cannot_be_true_in_the_report_s_language(lang: str) -> None:
    said = render(lang, "tampered_figure", {"what": "ex5.tampered_fp32", "matmuls": "16", "dtype": "float16"})
    detail = {"vi": "16 phép matmul ở float16 mà loss", "en": "16 matmuls in float16 whose losses"}[lang]
    assert detail in said and said.startswith(("Số liệu grader", "What the grader")), said
    # A learner's text inside it is shown, never interpreted (grader/intake/names.py shown).
    forged = render(lang, "tampered_figure", {"what": "tampered.figure", "name": "peak", "value": "-1\x1b[2J"})
    assert "\x1b" not in forged and "peak = -1" in forged, forged
    # A report an older grader wrote holds the text itself: kept as it is.
    assert "16 matmuls in torch.float16" in render(lang, "tampered_figure", {"what": "16 matmuls in torch.float16"})


def test_message_ids_are_declared_once() -> None:
    seen: dict[str, Path] = {}
    for path in CHECK_MODULES:
        for message_id in declared_texts(path).get("MESSAGES", {}):
            assert message_id not in seen, f"{message_id} in {seen.get(message_id)} and {path}"
            assert message_id not in CATALOGS["en"]["messages"], f"{message_id} is also a grader message"
            seen[message_id] = path


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


def test_every_check_of_the_course_has_its_module_and_hint() -> None:
    for check in load_course().checks:
        assert "HINT" in declared_texts(check.test_file), check.id


@pytest.mark.parametrize("lang", LANGS)
def test_a_failure_on_one_device_says_which(lang: str) -> None:
    text = render(lang, "ex3.to_not_assigned", {"device": "mps (stand-in)"})
    assert text.startswith(("On mps (stand-in): ", "Trên mps (stand-in): ")), text
    assert check_messages()["ex3.to_not_assigned"][lang].split("{")[0] in text
