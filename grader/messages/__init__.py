"""Learner-facing text, one YAML file per language, keyed by message id.

Checks never hold text: they fail with an id and parameters, and the report is rendered
in the language asked for. tests/test_messages.py keeps the languages in step.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from grader.course import LANGS

HERE = Path(__file__).parent


@functools.cache
def catalog(lang: str) -> Mapping[str, Mapping[str, str]]:
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}")
    data: dict[str, Any] = yaml.safe_load((HERE / f"{lang}.yaml").read_text(encoding="utf-8"))
    return data


class _Keep(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def render(lang: str, message_id: str, params: Mapping[str, str] | None = None) -> str:
    if not message_id:
        return ""
    template = catalog(lang)["messages"].get(message_id)
    if template is None:
        return f"[{message_id}] " + ", ".join(f"{k}={v}" for k, v in (params or {}).items())
    return template.format_map(_Keep(params or {}))


def hint(lang: str, check_id: str) -> str:
    return catalog(lang)["hints"].get(check_id, "")


def ui(lang: str, key: str) -> str:
    return catalog(lang)["ui"][key]
