"""The class's gradebook: ``gradebook.csv``, one row a learner (the contract's columns, then a
status), written by ``grader batch`` after each learner and by ``grader merge``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from grader.score.results import Report

GRADEBOOK = "gradebook.csv"


def gradebook_csv(reports: Iterable[Report], exercise_ids: Sequence[str]) -> str:
    """One row a learner. A learner the grader could not grade has empty scores and the status
    ``grader_error`` (never a 0 that reads like the learner's); the next batch run regrades it."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["learner", *exercise_ids, "score", "max_score", "status"])
    for report in sorted(reports, key=lambda r: r.learner):
        if report.grader_error:
            writer.writerow([report.learner, *[""] * len(exercise_ids), "", score_cell(report.max_score),
                             "grader_error"])
            continue
        scores = {ex.id: ex.score for ex in report.exercises}
        writer.writerow([report.learner, *(score_cell(scores[ex]) if ex in scores else "" for ex in exercise_ids),
                         score_cell(report.score), score_cell(report.max_score), "graded"])
    return out.getvalue()


def score_cell(value: float) -> str:
    return f"{value:g}"
