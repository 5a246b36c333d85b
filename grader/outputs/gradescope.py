"""Gradescope's side: ``results.json`` from a report (``grader grade --gradescope PATH``), and
the grading of one Gradescope submission (``grader autograde``, which the autograder package's
``run_autograder`` calls; grader/commands/gradescope_zip.py builds that package).

One Gradescope test per check. Public checks and hidden ones get the visibility that
course.yaml's ``gradescope.visibility`` names (default: public ``visible``, hidden
``after_published``); the top-level output never details a check that learners cannot see
yet, it only counts them. What the learner's code printed goes to run_autograder's stdout,
which Gradescope shows as ``gradescope.stdout_visibility`` says (default ``hidden``). Text comes
from grader/score/texts, in the report's language, each test's output is capped, and whatever of it
the learner wrote is shown, never interpreted (grader/intake/names.py ``shown``): the page is valid
UTF-8 JSON whatever the learner's code raised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.course import Course, GradescopeVisibility, Lang
from grader.intake.names import shown
from grader.outputs.report import write_atomic
from grader.score import texts
from grader.score.results import CheckResult, Report
from grader.wire.codec import cut

MAX_TEST_OUTPUT = 3000  # characters of one test's output on Gradescope's page; the cut says so


def _test(number: str, exercise_id: str, check: CheckResult, visibility: GradescopeVisibility,
          lang: Lang) -> dict[str, Any]:
    output = shown(check.message)
    if check.hint:
        output += f"\n{texts.ui(lang, 'hint')}: {shown(check.hint)}"
    return {
        "name": check.id,
        "number": number,
        "score": check.points,
        "max_score": check.max_points,
        "status": "passed" if check.status == "passed" else "failed",
        "output": cut(output.strip(), MAX_TEST_OUTPUT),
        "tags": [exercise_id],
        "visibility": visibility,
    }


def _output(report: Report, course: Course) -> str:
    lang = report.lang
    checks = [c for ex in report.exercises for c in ex.checks]
    public = [c for c in checks if c.visibility == "public"]
    later = [c for c in checks if c.visibility == "hidden"]
    lines = [f"{texts.ui(lang, 'title')}: {course.title[lang]}"]
    if report.grader_error:
        lines.append(f"{texts.ui(lang, 'grader_error')}: {shown(report.grader_error)}")
    lines += [
             texts.ui(lang, "gradescope.public").format(score=f"{sum(c.points for c in public):g}",
                                                           max_score=f"{sum(c.max_points for c in public):g}")]
    if later and course.gradescope.hidden != "visible":
        lines.append(texts.ui(lang, f"gradescope.{course.gradescope.hidden}").format(
            count=len(later), max_score=f"{sum(c.max_points for c in later):g}"))
    return "\n".join(lines)


def results_of(report: Report, course: Course, *, execution_time: float | None = None) -> dict[str, Any]:
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
        "visibility": "visible",  # the summary itself: hidden checks keep their own visibility
        "stdout_visibility": course.gradescope.stdout,
        "tests": tests,
    }


def write_results(report: Report, course: Course, path: Path, *, execution_time: float | None = None) -> None:
    write_page(path, results_of(report, course, execution_time=execution_time))


def write_page(path: Path, data: dict[str, Any]) -> None:
    """A results.json, atomically (its folder made if need be)."""
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def page_path(root: Path) -> Path:
    """Where Gradescope reads the page: ``root/results/results.json``."""
    return root / "results" / "results.json"


def unavailable_results(lang: Lang, reason: str) -> dict[str, Any]:
    """The results.json of a grader that cannot grade at all (a broken course or install)."""
    text = texts.ui(lang, "gradescope.unavailable").format(reason=cut(reason, 300))
    return {"score": 0.0, "execution_time": 0.0, "output": text, "output_format": "text",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": []}


