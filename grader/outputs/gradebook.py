"""The class's gradebook: ``gradebook.csv``, one row a learner (the contract's columns, then a
status, the name the learner submitted under, and with a roster the learner's name, e-mail,
section and submission entries), written by ``grader batch`` after each learner and by ``grader merge``.

With a roster (grader/outputs/classlist.py) the rows follow the roster's order: each learner graded
in this run, and each learner who submitted nothing (status ``missing``: a 0 or empty cells, as
the instructor chose; a shard lists them too, and a merge once), then the submissions that matched
nobody (status ``unmatched``, graded under their own name).

Every CSV the grader writes (this gradebook, the LMS files of grader/outputs/lms.py) goes through
``csv_text``, which makes each cell safe to open in a spreadsheet (``spreadsheet_cell``): a learner
names their file ``=HYPERLINK(...).py`` or ``+cmd|' /C calc'!A0.py``, and a cell that begins with
``= + - @``, a tab or a carriage return is a formula in Excel, LibreOffice and Google Sheets.
OWASP's advice ("CSV Injection"), followed here: such a cell is prefixed with a single quote, which
every spreadsheet shows as text, and every cell is quoted, so a separator inside one stays inside
(docs/instructors.md says what the quote means).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Literal

from grader.intake.names import shown
from grader.outputs.classlist import ClassRecord, MissingPolicy
from grader.score.results import Report

GRADEBOOK = "gradebook.csv"
RowStatus = Literal["graded", "grader_error", "missing", "unmatched"]
ROSTER_COLUMNS = ("name", "email", "section", "submission")
# What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"-|-?\d+(\.\d+)?([eE][-+]?\d+)?")


def spreadsheet_cell(value: str) -> str:
    """A cell a spreadsheet shows as the text it is: printable (grader/intake/names.py ``shown``),
    and prefixed with ``'`` when it would begin a formula."""
    text = shown(value)
    if _PLAIN_NUMBER.fullmatch(text):  # a score, or Moodle's "-" for no grade: never a formula
        return text
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    """Rows as CSV text: every cell made safe (``spreadsheet_cell``) and quoted."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        writer.writerow([spreadsheet_cell(cell) for cell in row])
    return out.getvalue()


def score_cell(value: float) -> str:
    return f"{value:g}"



def _scores(report: Report, exercise_ids: Sequence[str]) -> list[str]:
    """A graded learner's cells; a learner the grader could not grade has empty scores (never a 0
    that reads like the learner's): the next batch run regrades them."""
    if report.grader_error:
        return [*[""] * len(exercise_ids), ""]
    scores = {ex.id: ex.score for ex in report.exercises}
    return [*(score_cell(scores[ex]) if ex in scores else "" for ex in exercise_ids), score_cell(report.score)]


def _missing_scores(policy: MissingPolicy, exercise_ids: Sequence[str]) -> list[str]:
    return [("0" if policy == "zero" else "")] * (len(exercise_ids) + 1)


def _status(report: Report, otherwise: RowStatus) -> RowStatus:
    return "grader_error" if report.grader_error else otherwise


def gradebook_csv(reports: Iterable[Report], exercise_ids: Sequence[str], max_score: float,
                  record: ClassRecord | None = None) -> str:
    """One row a learner of this run (or of the roster), as the module's docstring says."""
    by_learner = {report.learner: report for report in reports}
    header = ["learner", *exercise_ids, "score", "max_score", "status", "submitted_as"]
    if record is None:
        rows = [[report.learner, *_scores(report, exercise_ids), score_cell(report.max_score),
                 _status(report, "graded"), report.submitted_as] for _, report in sorted(by_learner.items())]
        return csv_text([header, *rows])
    rows = []
    for member in record.members:
        report = by_learner.pop(member.key, None)
        entries = "; ".join(record.submissions.get(member.key, ()))
        identity = [member.name, member.email, member.section, entries]
        if report is None and record.submissions.get(member.key):
            continue  # submitted, not graded in this run (another shard's, or not yet)
        if report is None:
            rows.append([member.key, *_missing_scores(record.missing, exercise_ids), score_cell(max_score),
                         "missing", "", *identity])
        else:
            rows.append([member.key, *_scores(report, exercise_ids), score_cell(report.max_score),
                         _status(report, "graded"), report.submitted_as, *identity])
    unmatched = {u.learner: u for u in record.unmatched}
    for learner, report in sorted(by_learner.items()):
        entry = unmatched[learner].submission if learner in unmatched else report.submission
        rows.append([learner, *_scores(report, exercise_ids), score_cell(report.max_score),
                     _status(report, "unmatched"), report.submitted_as, "", "", "", entry])
    return csv_text([[*header, *ROSTER_COLUMNS], *rows])
