"""The class's gradebook: ``gradebook.csv``, one row a learner (the contract's columns, then a
status and the name the learner submitted under), written by ``grader batch`` after each learner
and by ``grader merge``.

Every CSV the grader writes goes through ``csv_text``, which makes each cell safe to open in a
spreadsheet (``spreadsheet_cell``): a learner names their file ``=HYPERLINK(...).py`` or
``+cmd|' /C calc'!A0.py``, and a cell that begins with ``= + - @``, a tab or a carriage return is a
formula in Excel, LibreOffice and Google Sheets. OWASP's advice ("CSV Injection"), followed here:
such a cell is prefixed with a single quote, which every spreadsheet shows as text, and every cell
is quoted, so a separator inside one stays inside (docs/instructors.md says what the quote means).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from grader.intake.names import shown
from grader.score.results import Report

GRADEBOOK = "gradebook.csv"
# What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: str) -> str:
    """A cell a spreadsheet shows as the text it is: printable (grader/intake/names.py ``shown``),
    and prefixed with ``'`` when it would begin a formula."""
    text = shown(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    """Rows as CSV text: every cell made safe (``spreadsheet_cell``) and quoted."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        writer.writerow([spreadsheet_cell(cell) for cell in row])
    return out.getvalue()


def gradebook_csv(reports: Iterable[Report], exercise_ids: Sequence[str]) -> str:
    """One row a learner. A learner the grader could not grade has empty scores and the status
    ``grader_error`` (never a 0 that reads like the learner's); the next batch run regrades it."""
    rows = [["learner", *exercise_ids, "score", "max_score", "status", "submitted_as"]]
    for report in sorted(reports, key=lambda r: r.learner):
        if report.grader_error:
            rows.append([report.learner, *[""] * len(exercise_ids), "", score_cell(report.max_score),
                         "grader_error", report.submitted_as])
            continue
        scores = {ex.id: ex.score for ex in report.exercises}
        rows.append([report.learner, *(score_cell(scores[ex]) if ex in scores else "" for ex in exercise_ids),
                     score_cell(report.score), score_cell(report.max_score), "graded", report.submitted_as])
    return csv_text(rows)


def score_cell(value: float) -> str:
    return f"{value:g}"
