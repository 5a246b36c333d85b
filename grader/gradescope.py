"""Gradescope's ``results.json`` from a report, for ``grader grade --gradescope PATH``.

One Gradescope test per check. Public checks and hidden ones get the visibility that
course.yaml's ``gradescope.visibility`` names (default: public ``visible``, hidden
``after_published``); the top-level output never details a check that learners cannot see
yet, it only counts them. Text comes from grader/messages, in the report's language.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader import messages
from grader.course import Course
from grader.report import write_atomic
from grader.results import CheckResult, Report


def _test(number: str, exercise_id: str, check: CheckResult, visibility: str, lang: str) -> dict[str, Any]:
    output = check.message
    if check.hint:
        output += f"\n{messages.ui(lang, 'hint')}: {check.hint}"
    return {
        "name": check.id,
        "number": number,
        "score": check.points,
        "max_score": check.max_points,
        "status": "passed" if check.status == "passed" else "failed",
        "output": output.strip(),
        "tags": [exercise_id],
        "visibility": visibility,
    }


def _output(report: Report, course: Course) -> str:
    lang = report.lang
    checks = [c for ex in report.exercises for c in ex.checks]
    public = [c for c in checks if c.visibility == "public"]
    later = [c for c in checks if c.visibility == "hidden"]
    lines = [f"{messages.ui(lang, 'title')}: {course.title[lang]}"]
    if report.grader_error:
        lines.append(f"{messages.ui(lang, 'grader_error')}: {report.grader_error}")
    lines += [
             messages.ui(lang, "gradescope.public").format(score=f"{sum(c.points for c in public):g}",
                                                           max_score=f"{sum(c.max_points for c in public):g}")]
    if later and course.gradescope.hidden != "visible":
        lines.append(messages.ui(lang, f"gradescope.{course.gradescope.hidden}").format(
            count=len(later), max_score=f"{sum(c.max_points for c in later):g}"))
    return "\n".join(lines)


def results(report: Report, course: Course, *, execution_time: float | None = None) -> dict[str, Any]:
    visibility = {"public": course.gradescope.public, "hidden": course.gradescope.hidden}
    tests = [
        _test(f"{i}.{j}", ex.id, check, visibility[check.visibility], report.lang)
        for i, ex in enumerate(report.exercises, 1)
        for j, check in enumerate(ex.checks, 1)
    ]
    seconds = report.grading_seconds if execution_time is None else execution_time
    return {
        "score": report.score,
        "execution_time": round(seconds, 2),
        "output": _output(report, course),
        "output_format": "text",
        "test_output_format": "text",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def write_results(report: Report, course: Course, path: Path, *, execution_time: float | None = None) -> None:
    data = results(report, course, execution_time=execution_time)
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")
