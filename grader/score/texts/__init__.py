"""Learner-facing text in Vietnamese and English, keyed by message id; rendered by the parent.

Two places hold it, each for its own kind of text:
- a check's own texts live in its module, next to the code that fails with them: ``HINT`` (which
  lesson section to reread) and ``MESSAGES`` (one entry per message id the check fails with),
  each ``{"vi": ..., "en": ...}``; an exercise's shared helper module may declare ``MESSAGES`` used
  by several of its checks. They are read here from the source, without importing the checks
  (which import torch), so the grader's own process stays light;
- the grader's own texts (how a run ended, the report's words, the self-check's table) are in
  ``vi.yaml`` and ``en.yaml`` in this folder.
A learner's bundle ships only the public checks' modules, so hidden checks' texts never leave the
instructor's copy. tests/test_messages.py keeps every id declared, in both languages.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grader import yamltext
from grader.course import LANGS, Lang
from grader.intake.names import shown
from grader.paths import CHECKS_DIR, TEXTS_DIR

Texts = Mapping[str, Mapping[str, str]]  # id -> lang -> text


@functools.cache
def catalog(lang: Lang) -> Mapping[str, Mapping[str, str]]:
    """The grader's own texts in one language: sections ``messages`` and ``ui``."""
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}")
    data: dict[str, Any] = yamltext.load((TEXTS_DIR / f"{lang}.yaml").read_text(encoding="utf-8"))
    return data


def declared_texts(path: Path) -> dict[str, Any]:
    """The ``HINT`` and ``MESSAGES`` a check module (or an exercise's helper) declares, read from
    its source: literal dicts, so nothing of it runs here."""
    found: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in ("HINT", "MESSAGES")):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


@functools.cache
def _check_texts(checks_dir: Path) -> tuple[Texts, dict[Path, Mapping[str, str]]]:
    messages: dict[str, Mapping[str, str]] = {}
    hints: dict[Path, Mapping[str, str]] = {}
    for path in sorted(checks_dir.rglob("*.py")):
        declared = declared_texts(path)
        messages.update(declared.get("MESSAGES", {}))
        if "HINT" in declared:
            hints[path.resolve()] = declared["HINT"]
    return messages, hints


def check_messages() -> Texts:
    return _check_texts(CHECKS_DIR)[0]


# A message whose placeholder holds another message's text, in the same language and from the same
# parameters: a tampered figure's ``{what}`` says what cannot be true (grader/judge/outcomes.py Tampered).
NESTED = {"tampered_figure": "what"}


class _Keep(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(lang: Lang, message_id: str, params: Mapping[str, str] | None = None) -> str:
    """A message in ``lang``, its placeholders filled; ``device`` (where a multi-device check
    failed) becomes a prefix: "On mps (stand-in): ..."."""
    if not message_id:
        return ""
    # Learner text (an exception's message, a file name) is shown, never interpreted: whatever
    # reads the report — a terminal, a page, a spreadsheet — gets no control character from it.
    given = {str(key): str(value) for key, value in (params or {}).items()}
    params = {key: shown(value) for key, value in given.items()}
    slot = NESTED.get(message_id)
    if slot is not None and _declared(given.get(slot, "")):  # (a report of an older grader holds the text itself)
        params[slot] = render(lang, given[slot], {k: v for k, v in given.items() if k not in (slot, "device")})
    template = catalog(lang)["messages"].get(message_id) or check_messages().get(message_id, {}).get(lang)
    if template is None:
        return f"[{message_id}] " + ", ".join(f"{k}={v}" for k, v in params.items())
    text = template.format_map(_Keep(params))
    if params.get("device"):
        text = ui(lang, "on_device").format(device=params["device"]) + text
    return text


def _declared(message_id: str) -> bool:
    return message_id in catalog("en")["messages"] or message_id in check_messages()


def hint(lang: Lang, test_file: Path) -> str:
    """The hint of the check whose module is ``test_file`` (CheckSpec.test_file)."""
    return _check_texts(CHECKS_DIR)[1].get(test_file.resolve(), {}).get(lang, "")


def ui(lang: Lang, key: str) -> str:
    return catalog(lang)["ui"][key]
