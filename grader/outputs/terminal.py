"""The report on a terminal: a few lines per exercise, what to fix, and the stopped cells.
"""

from __future__ import annotations

import unicodedata

from grader.score import texts
from grader.score.results import Report


def shown(text: str) -> str:
    """Outside text (a learner's name, a file name) for the terminal: every control character
    shown escaped (``\\x1b``), never sent to the terminal to interpret."""
    return "".join(ch if unicodedata.category(ch)[0] != "C" or ch == " " else ascii(ch)[1:-1] for ch in text)


def top_level_lines(report: Report) -> list[str]:
    """The stopped cells, for a terminal or a text table: a heading, then one line each."""
    if not report.top_level:
        return []
    heading = texts.ui(report.lang, "top_level.heading").format(count=len(report.top_level))
    return [heading, *(f"  · {stop.message}" for stop in report.top_level)]


def summary(report: Report) -> str:
    """A few lines for the terminal: the score per exercise and what to fix."""
    lang = report.lang
    t = lambda key: texts.ui(lang, key)  # noqa: E731 - a local shorthand
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
