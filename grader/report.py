"""Write the YAML report (atomically) and the terminal summary."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from grader import messages
from grader.results import CheckResult, Report


def _check(check: CheckResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": check.id,
        "status": check.status,
        "points": check.points,
        "max_points": check.max_points,
        "message": check.message,
    }
    if check.hint:
        data["hint"] = check.hint
    data["mode"] = check.mode
    if check.devices:
        data["devices"] = list(check.devices)
    data["visibility"] = check.visibility
    data["seconds"] = round(check.duration_s, 3)
    return data


def as_dict(report: Report) -> dict[str, Any]:
    device: dict[str, Any] = {"type": report.device.type, "name": report.device.name,
                              "torch": report.device.torch, "standin": report.device.standin}
    return {
        "learner": report.learner,
        "submission": report.submission,
        "score": report.score,
        "max_score": report.max_score,
        "device": device,
        "lang": report.lang,
        "grading_seconds": report.grading_seconds,
        "grader_version": report.grader_version,
        "notes": list(report.notes),
        "grader_error": report.grader_error or None,
        # The learner's cells that stopped (no points lost): once here, never inside a check.
        "top_level": [
            {"where": stop.where, "kind": stop.kind, "error": stop.error, "message": stop.message,
             **({"kept": list(stop.kept)} if stop.kept else {})}
            for stop in report.top_level
        ],
        "output": report.output,
        "exercises": {
            ex.id: {
                "title": ex.title,
                "score": ex.score,
                "max_score": ex.max_score,
                "status": ex.status,
                "checks": [_check(c) for c in ex.checks],
            }
            for ex in report.exercises
        },
    }


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_yaml(report: Report, path: Path) -> None:
    write_atomic(path, yaml.safe_dump(as_dict(report), allow_unicode=True, sort_keys=False, width=100))


def top_level_lines(report: Report) -> list[str]:
    """The stopped cells, for a terminal or a text table: a heading, then one line each."""
    if not report.top_level:
        return []
    heading = messages.ui(report.lang, "top_level.heading").format(count=len(report.top_level))
    return [heading, *(f"  · {stop.message}" for stop in report.top_level)]


def summary(report: Report) -> str:
    """A few lines for the terminal: the score per exercise and what to fix."""
    lang = report.lang
    t = lambda key: messages.ui(lang, key)  # noqa: E731 - a local shorthand
    device = f"{report.device.type} ({report.device.name}, torch {report.device.torch})"
    lines = [f"{t('title')} — {t('learner')}: {report.learner}", f"{t('device')}: {device}"]
    if report.device.standin:
        lines.append(f"  ({t('standin')})")
    if report.grader_error:
        lines.append(f"{t('grader_error')}: {report.grader_error}")
    lines += top_level_lines(report)
    for ex in report.exercises:
        status = t(f"status.{ex.status}")
        lines.append(f"  {ex.id}  {ex.score:5.1f} / {ex.max_score:5.1f}  {status:<14} {ex.title}")
        for check in ex.checks:
            if check.status not in ("passed", "not_attempted", "skipped"):
                lines.append(f"      ✗ {check.id} [{t('status.' + check.status)}] {check.message}")
                if check.hint:
                    lines.append(f"        {t('hint')}: {check.hint}")
    total = f"{t('score')}: {report.score:.1f} / {report.max_score:.1f}"
    lines.append(f"{total}   ({t('time')} {report.grading_seconds:.1f} s)")
    return "\n".join(lines)
