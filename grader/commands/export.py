"""``grader export canvas|moodle OUT -o FILE``: the grades of a batch output, for the learning
platform's own grade import (grader/outputs/lms.py; docs/instructors.md says where to click).

The batch must have been given the class's roster (``grader batch ... --roster``): the platform
needs to know each learner by its own identifiers, which only the roster has. The reports are read
back sealed, as ``grader merge`` reads them: a report changed by hand is refused.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from grader.commands.batch import reports_lang, sealed_reports
from grader.course import Course
from grader.errors import GraderError
from grader.intake.names import shown
from grader.outputs.classlist import load_record
from grader.outputs.lms import Exported, Platform, export
from grader.outputs.report import write_atomic

MAX_TITLE = 255  # Canvas's and Moodle's assignment names are at most 255 characters


@dataclass(frozen=True)
class ExportResult:
    platform: Platform
    output: Path
    assignment: str
    exported: Exported


def _title(text: str) -> str:
    if not text.strip() or len(text) > MAX_TITLE or any(ch in text for ch in "\r\n\0"):
        raise GraderError(f"--assignment: {text!r} must be one line of at most {MAX_TITLE} characters")
    return text


def run_export(platform: Platform, out_dir: Path, output: Path, course: Course, *,
               assignment: str | None = None) -> ExportResult:
    record = load_record(out_dir)
    if record is None:
        raise GraderError(f"export: {out_dir} was graded without a roster; grade the class with "
                          f"`grader batch SUBMISSIONS -o {out_dir} --roster roster.csv` (it regrades nothing that "
                          "is up to date), then export again")
    reports = [stored.report for _, stored in sealed_reports(out_dir, "export")]
    title = _title(assignment or course.title[reports_lang(reports, course)])
    exported = export(platform, record, reports, assignment=title, max_score=course.max_score)
    write_atomic(output, exported.text)
    return ExportResult(platform, output, title, exported)


def warnings(result: ExportResult) -> list[str]:
    """What the instructor must know before uploading: learners left without a grade or out."""
    done = result.exported
    lines = []
    if done.not_graded:
        lines.append(f"{len(done.not_graded)} learners have no grade in the file (the grader could not grade them, "
                     f"or their report is not in this folder): {', '.join(map(shown, done.not_graded))}; "
                     "run the batch again (or merge every shard), then export again")
    if done.left_out:
        lines.append(f"{len(done.left_out)} submissions match nobody on the roster and are not in the file: "
                     f"{', '.join(map(shown, done.left_out))} (see roster.yaml and the summary)")
    if done.unidentified:
        lines.append(f"{len(done.unidentified)} learners have none of the columns {result.platform} identifies "
                     f"learners by (the platform will not find them): {', '.join(map(shown, done.unidentified))}")
    return lines


def report_lines(result: ExportResult) -> list[str]:
    done = result.exported
    columns = ", ".join(f"{column} {count}/{done.learners}" for column, count in done.identifiers.items())
    return [f"{result.output}: {done.learners} learners for {result.platform} ({done.graded} graded, "
            f"{done.missing} did not submit), assignment {shown(result.assignment)}; learners identified by: "
            f"{columns}",
            *(f"grader: warning: {line}" for line in warnings(result))]


def print_result(result: ExportResult) -> None:
    first, *rest = report_lines(result)
    print(first)
    for line in rest:
        print(line, file=sys.stderr)
