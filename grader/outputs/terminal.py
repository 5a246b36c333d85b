"""The report on a terminal: a few lines per exercise, what to fix, and the stopped cells.

What the learner wrote reaches the instructor's terminal here (their file's name, their exception's
text, their cells' errors), so two rules hold for every line (issue 23):

* **shown, never interpreted**: each text goes through grader/intake/names.py ``shown`` — an escape
  sequence (a window title, a cleared screen, colours), a carriage return or a newline is printed
  as ``\\x1b``, ``\\r``, ``\\n``, so it neither acts on the terminal nor starts a line;
* **learner text never starts a line**: a line that holds learner text is wrapped to the terminal's
  width (``COLUMNS``, else the terminal's, else 100) with every continuation indented, so the
  terminal never wraps it itself. A line that starts at column 0 is always one of the grader's own —
  the title, the device, the top level's heading, the score — and a forged
  ``Score: 100.0 / 100.0`` can only ever appear inside an indented line.
"""

from __future__ import annotations

import shutil
import textwrap

from grader.intake.names import shown
from grader.score import texts
from grader.score.results import Report

DEFAULT_WIDTH = 100  # when neither COLUMNS nor a terminal says
MIN_WIDTH = 40


def top_level_lines(report: Report) -> list[str]:
    """The stopped cells, for a terminal or a text table: a heading, then one line each."""
    if not report.top_level:
        return []
    heading = texts.ui(report.lang, "top_level.heading").format(count=len(report.top_level))
    return [heading, *(f"  · {shown(stop.message)}" for stop in report.top_level)]


def _wrapped(line: str, indent: str, width: int) -> list[str]:
    """One logical line as terminal lines of at most ``width`` characters, each continuation indented."""
    return textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False) or [""]


def summary(report: Report, width: int | None = None) -> str:
    """A few lines for the terminal: the score per exercise and what to fix."""
    width = max(width or shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns, MIN_WIDTH)
    lang = report.lang

    def t(key: str) -> str:
        return texts.ui(lang, key)

    device = shown(f"{report.device.type} ({report.device.name}, torch {report.device.torch})")
    lines = [(f"{t('title')} — {t('learner')}: {shown(report.learner)}", "    "), (f"{t('device')}: {device}", "    ")]
    if report.device.standin:
        lines.append((f"  ({t('standin')})", "   "))
    if report.grader_error:
        lines.append((f"{t('grader_error')}: {shown(report.grader_error)}", "    "))
    lines += [(line, "    ") for line in top_level_lines(report)]
    for ex in report.exercises:
        status = t(f"status.{ex.status}")
        lines.append((f"  {ex.id}  {ex.score:5.1f} / {ex.max_score:5.1f}  {status:<14} {ex.title}", "    "))
        for check in ex.checks:
            if check.status not in ("passed", "not_attempted", "skipped"):
                lines.append((f"      ✗ {check.id} [{t('status.' + check.status)}] {shown(check.message)}", " " * 8))
                if check.hint:
                    lines.append((f"        {t('hint')}: {shown(check.hint)}", " " * 10))
    out = [wrapped for line, indent in lines for wrapped in _wrapped(line, indent, width)]
    total = f"{t('score')}: {report.score:.1f} / {report.max_score:.1f}"
    out.append(f"{total}   ({t('time')} {report.grading_seconds:.1f} s)")
    return "\n".join(out)
