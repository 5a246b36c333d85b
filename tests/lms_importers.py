"""What Canvas's and Moodle's grade importers read of a CSV file, ported line for line from their
source, so that the tests check ``grader export`` against the platforms' own rules rather than
against our idea of them.

- Canvas: ``app/models/gradebook_importer.rb`` (instructure/canvas-lms): ``header?``,
  ``row_has_student_headers?``, ``update_column_count``, ``strip_non_assignment_columns``,
  ``check_for_non_student_row``, ``process_student``, ``Assignment.title_and_id`` (the regexp
  ``/\\A(.*)\\s\\((\\d+)\\)\\z/``), ``identify_delimiter`` and the ``skip_lines`` option.
- Moodle: ``grade/import/csv/classes/load_data.php`` (moodle/moodle): ``trim_headers``,
  ``map_user_data_with_value`` (the user fields a column can be mapped to), ``import_new_grade_item``
  (``-`` is no grade) and ``insert_grade_record`` (a grade above 100, the default
  ``gradepointmax``, fails the import).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field


class ImportRefused(Exception):
    """The platform would refuse this file (its own message, where it has one)."""


# --- Canvas ---------------------------------------------------------------------------------

NON_ASSIGNMENT_COLUMN_HEADERS = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                                 "Final Grade", "Override Score", "Override Grade", "Override Status")


@dataclass
class CanvasAssignment:
    title: str
    id: str | None  # an existing assignment's id, from "Title (123)"
    points_possible: str | None = None


@dataclass
class CanvasStudent:
    name: str
    id: str  # Canvas user id ("" when absent)
    sis_user_id: str | None
    sis_login_id: str | None
    grades: list[str] = field(default_factory=list)


@dataclass
class CanvasImport:
    assignments: list[CanvasAssignment]
    students: list[CanvasStudent]


def _title_and_id(text: str) -> tuple[str, str | None]:
    found = re.fullmatch(r"(.*)\s\((\d+)\)", text, flags=re.DOTALL)
    return (found.group(1), found.group(2)) if found else (text, None)


def canvas_import(text: str) -> CanvasImport:
    first_lines = text.splitlines()[:3]
    counts = {}
    for sep in (";", ","):
        sizes = {len(next(csv.reader([line], delimiter=sep))) for line in first_lines}
        counts[sep] = sizes.pop() if len(sizes) == 1 else 0
    delimiter = ";" if counts[";"] > counts[","] else ","
    rows = [row for row in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
            if not re.fullmatch(r"[;, ]+", delimiter.join(row))]
    header = rows[0]
    if not (len(header) > 3 and "Student" in header[0] and "ID" in header[1]):
        raise ImportRefused("Invalid header row")
    student_columns = 3
    sis_user_col = sis_login_col = None
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        sis_login_col = 2
        student_columns += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        extra = 1 if re.search(r"Integration\s+ID", header[4] if len(header) > 4 else "") else 0
        sis_user_col, sis_login_col = 2, 3
        student_columns += 2 + extra
        if re.search(r"Root\s+Account", header[4 + extra] if len(header) > 4 + extra else ""):
            student_columns += 1
    if "Section" not in header[student_columns - 1]:
        raise ImportRefused("Invalid header row")
    non_assignment = re.compile("|".join(NON_ASSIGNMENT_COLUMN_HEADERS))
    positions = [i for i in range(student_columns, len(header)) if not non_assignment.search(header[i])]
    assignments = [CanvasAssignment(*_title_and_id(header[i])) for i in positions]
    students: list[CanvasStudent] = []
    for row in rows[1:]:
        if row and "Points Possible" in row[0]:
            for assignment, i in zip(assignments, positions, strict=True):
                assignment.points_possible = row[i] if i < len(row) and row[i] != "" else None
            continue
        if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", cell, flags=re.IGNORECASE) for cell in row if cell):
            continue
        students.append(CanvasStudent(
            row[0], row[1], row[sis_user_col] if sis_user_col is not None else None,
            row[sis_login_col] if sis_login_col is not None else None,
            [row[i].strip() if i < len(row) else "" for i in positions]))
    return CanvasImport(assignments, students)


# --- Moodle ---------------------------------------------------------------------------------

MOODLE_USER_FIELDS = {"userid": "id", "useridnumber": "idnumber", "useremail": "email", "username": "username"}
MOODLE_GRADE_POINT_MAX = 100.0


@dataclass
class MoodleGrade:
    user_value: str  # the mapped column's value, looked up as the user field
    grade: float | None  # None: no grade


def moodle_import(text: str, map_from: str, grade_column: str) -> list[MoodleGrade]:
    """The rows Moodle's importer takes when the instructor maps ``map_from`` to a user field and
    ``grade_column`` to a new grade item."""
    if text.startswith("\ufeff"):
        text = text[1:]
    rows = list(csv.reader(io.StringIO(text, newline="")))
    headers = [h.strip() for h in rows[0]]
    if map_from not in headers or grade_column not in headers:
        raise ImportRefused(f"no column {map_from!r} or {grade_column!r} in {headers!r}")
    user_at, grade_at = headers.index(map_from), headers.index(grade_column)
    grades = []
    for row in rows[1:]:
        value = row[user_at] if user_at < len(row) else ""
        if not value:
            continue  # "Skip invalid row with blank user field."
        cell = row[grade_at].strip() if grade_at < len(row) else ""
        if cell == "-":
            grades.append(MoodleGrade(value, None))
            continue
        try:
            grade = float(cell)
        except ValueError:
            raise ImportRefused(f"badgrade: {cell!r}") from None
        if grade > MOODLE_GRADE_POINT_MAX:
            raise ImportRefused(f"gradevaluetoobig: {grade}")
        grades.append(MoodleGrade(value, grade))
    return grades
