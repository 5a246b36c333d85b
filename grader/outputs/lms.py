"""Grade files the learning platforms import: Canvas's gradebook CSV and Moodle's grade import CSV.

Built from a batch output that was given a roster (grader/outputs/classlist.py): one row per learner
of the roster, never a submission that matched nobody (the platform would not know whom it is),
each learner identified by the columns the platform matches on.

- **Canvas** (Grades → Import; the importer is ``app/models/gradebook_importer.rb``): the header
  must start ``Student, ID`` and end its learner columns with ``Section``; with ``SIS User ID``
  and ``SIS Login ID`` between them, as Canvas's own export writes. Canvas finds the learner by
  ``ID`` (its user id), then ``SIS User ID``, then ``SIS Login ID``, then the name. A second row
  whose first cell holds "Points Possible" gives the assignment's points. A column titled
  ``Title (123)`` grades the existing assignment 123; any other title an assignment of that
  exact title, or a new one. An empty cell changes nothing.
- **Moodle** (Grades → Import → CSV file; ``grade/import/csv/classes/load_data.php``): one row
  per learner; the instructor maps one column to a user field ("Map from" ``Email address`` →
  "Map to" ``Email address``, or ``ID number`` → ``ID number``) and the grade column to a grade
  item or a new one (out of 100 unless the site raised ``gradepointmax``). A cell ``-`` is "no
  grade"; an empty one is not, for a new grade item.

Both files are UTF-8 without a BOM, comma-separated: what each importer reads by default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from grader.outputs.classlist import ClassRecord, MissingPolicy
from grader.outputs.gradebook import csv_text, score_cell
from grader.score.results import Report

Platform = Literal["canvas", "moodle"]
PLATFORMS: tuple[Platform, ...] = ("canvas", "moodle")
CANVAS_POINTS_ROW = "    Points Possible"  # as Canvas's own export writes it (gradebook_exporter.rb)
CANVAS_HEADER = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_HEADER = ("ID number", "Email address", "Full name")
# The columns each platform finds a learner by, in the order it tries them.
IDENTIFIERS: Mapping[Platform, tuple[str, ...]] = {"canvas": ("ID", "SIS User ID", "SIS Login ID"),
                                                   "moodle": ("ID number", "Email address")}
MOODLE_NO_GRADE = "-"


@dataclass(frozen=True)
class Exported:
    text: str
    learners: int  # rows written
    graded: int  # rows with a grade from a report
    missing: int  # rows of learners who submitted nothing
    not_graded: tuple[str, ...]  # learners the grader could not grade: left without a grade
    left_out: tuple[str, ...]  # submissions that matched nobody: not in the file
    unidentified: tuple[str, ...]  # learners without any column the platform matches on
    identifiers: Mapping[str, int]  # each column the platform can match learners on -> rows that fill it


def _grade(report: Report | None, submitted: bool, missing: MissingPolicy, no_grade: str) -> tuple[str, str]:
    """The cell for a learner and what it is: graded, missing, or not_graded (the grader could not
    grade them, or they submitted and no report is here: a shard left out of the merge)."""
    if report is None and not submitted:
        return ("0" if missing == "zero" else no_grade), "missing"
    if report is None or report.grader_error:
        return no_grade, "not_graded"
    return score_cell(report.score), "graded"


def _canvas_name(name: str) -> str:
    # Canvas reads any row whose first cell contains "Points Possible" as the points row: a learner
    # named so would set the assignment's points. Canvas matches by the id columns first.
    return "" if "Points Possible" in name else name


def export(platform: Platform, record: ClassRecord, reports: Sequence[Report], *, assignment: str,
           max_score: float) -> Exported:
    by_key = {report.learner: report for report in reports}
    no_grade = "" if platform == "canvas" else MOODLE_NO_GRADE
    if platform == "canvas":
        rows: list[list[str]] = [[*CANVAS_HEADER, assignment],
                                 [CANVAS_POINTS_ROW, "", "", "", "", score_cell(max_score)]]
    else:
        rows = [[*MOODLE_HEADER, assignment]]
    counts = {"graded": 0, "missing": 0, "not_graded": 0}
    not_graded: list[str] = []
    unidentified: list[str] = []
    for member in record.members:
        cell, kind = _grade(by_key.get(member.key), bool(record.submissions.get(member.key)), record.missing,
                            no_grade)
        counts[kind] += 1
        if kind == "not_graded":
            not_graded.append(member.key)
        if platform == "canvas":
            if not (member.canvas_id or member.student_id or member.login):
                unidentified.append(member.key)
            rows.append([_canvas_name(member.sortable or member.name), member.canvas_id,
                         member.student_id, member.login, member.section, cell])
        else:
            if not (member.student_id or member.email):
                unidentified.append(member.key)
            rows.append([member.student_id, member.email, member.name, cell])
    header = rows[0]
    learner_rows = rows[2:] if platform == "canvas" else rows[1:]
    filled = {column: sum(1 for row in learner_rows if row[header.index(column)]) for column in IDENTIFIERS[platform]}
    return Exported(csv_text(rows), len(record.members), counts["graded"], counts["missing"], tuple(not_graded),
                    tuple(u.learner for u in record.unmatched), tuple(unidentified), filled)
