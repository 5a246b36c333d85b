"""The class's gradebook: ``gradebook.csv``, one row a learner (the contract's columns, then a
status), written by ``grader batch`` after each learner and by ``grader merge``.

With a roster (grader/outputs/classlist.py) the rows follow the roster's order: each learner graded
in this run, and each learner who submitted nothing (status ``missing``: a 0 or empty cells, as
the instructor chose; a shard lists them too, and a merge once), then the submissions that matched
nobody (status ``unmatched``, graded under their own name); four columns follow the status: the
learner's name, e-mail and section as the roster writes them, and the submission's entries in the
submissions folder.

Every cell of text that came from outside the grader (a learner's name, a file name, a roster
cell) goes through ``text_cell``, the one place that decides how such text is written into a CSV
file a spreadsheet will open; the LMS files (grader/outputs/lms.py) use it too.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Literal

from grader.outputs.classlist import ClassRecord, MissingPolicy
from grader.score.results import Report

GRADEBOOK = "gradebook.csv"
RowStatus = Literal["graded", "grader_error", "missing", "unmatched"]
ROSTER_COLUMNS = ("name", "email", "section", "submission")
# A spreadsheet reads a cell that starts with one of these as a formula (OWASP, "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def score_cell(value: float) -> str:
    return f"{value:g}"


def text_cell(value: str) -> str:
    """Outside text as a CSV cell that a spreadsheet shows as text, never runs as a formula."""
    return "'" + value if value.startswith(_FORMULA_START) else value


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(rows)
    return out.getvalue()


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
    header = ["learner", *exercise_ids, "score", "max_score", "status"]
    if record is None:
        rows = [[text_cell(report.learner), *_scores(report, exercise_ids), score_cell(report.max_score),
                 _status(report, "graded")] for _, report in sorted(by_learner.items())]
        return csv_text([header, *rows])
    rows = []
    for member in record.members:
        report = by_learner.pop(member.key, None)
        entries = "; ".join(record.submissions.get(member.key, ()))
        identity = [text_cell(member.name), text_cell(member.email), text_cell(member.section), text_cell(entries)]
        if report is None and record.submissions.get(member.key):
            continue  # submitted, not graded in this run (another shard's, or not yet)
        if report is None:
            rows.append([text_cell(member.key), *_missing_scores(record.missing, exercise_ids), score_cell(max_score),
                         "missing", *identity])
        else:
            rows.append([text_cell(member.key), *_scores(report, exercise_ids), score_cell(report.max_score),
                         _status(report, "graded"), *identity])
    unmatched = {u.learner: u for u in record.unmatched}
    for learner, report in sorted(by_learner.items()):
        entry = unmatched[learner].submission if learner in unmatched else report.submission
        rows.append([text_cell(learner), *_scores(report, exercise_ids), score_cell(report.max_score),
                     _status(report, "unmatched"), "", "", "", text_cell(entry)])
    return csv_text([[*header, *ROSTER_COLUMNS], *rows])
