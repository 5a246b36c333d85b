"""Gradescope's side: ``results.json`` from a report (``grader grade --gradescope PATH``), and
the grading of one Gradescope submission (``grader autograde``, which the autograder package's
``run_autograder`` calls; grader/gradescope_zip.py builds that package).

One Gradescope test per check. Public checks and hidden ones get the visibility that
course.yaml's ``gradescope.visibility`` names (default: public ``visible``, hidden
``after_published``); the top-level output never details a check that learners cannot see
yet, it only counts them. What the learner's code printed goes to run_autograder's stdout,
which Gradescope shows as ``gradescope.stdout_visibility`` says (default ``hidden``). Text comes
from grader/messages, in the report's language, and each test's output is capped.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import messages
from grader.course import Course
from grader.errors import GraderError
from grader.grading import grade_or_failed
from grader.isolation import Isolation
from grader.launch import ExecLauncher
from grader.protocol import cut
from grader.report import write_atomic, write_yaml
from grader.results import CheckResult, Report
from grader.submission import IGNORED_NAMES

MAX_TEST_OUTPUT = 3000  # characters of one test's output on Gradescope's page; the cut says so
SEARCH_DEPTH = 4  # how deep a submission's files may sit in what Gradescope hands over


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
        "output": cut(output.strip(), MAX_TEST_OUTPUT),
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
    _write_page(path, results_of(report, course, execution_time=execution_time))


def _write_page(path: Path, data: dict[str, Any]) -> None:
    """A results.json, atomically (its folder made if need be)."""
    write_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _page_path(root: Path) -> Path:
    """Where Gradescope reads the page: ``root/results/results.json``."""
    return root / "results" / "results.json"


@dataclass(frozen=True)
class Autograded:
    results: Path
    score: float
    grader_error: str  # "" when graded


def find_submission(folder: Path, modules: Iterable[str]) -> Path | None:
    """Where the learner's files are in what Gradescope handed over (an upload, a zip's top
    folder, a GitHub repository): the shallowest folder holding exercise files (the most of them
    on a tie), else the one .py or .ipynb there is; None when there is nothing to grade."""
    names = {f"{module}{suffix}" for module in modules for suffix in (".py", ".ipynb")}
    folders: list[tuple[int, int, str, Path]] = []
    singles: list[Path] = []
    todo = [(folder, 0)]
    while todo:
        here, depth = todo.pop()
        try:
            entries = sorted(here.iterdir())
        except OSError:
            continue
        entries = [e for e in entries if not e.name.startswith((".", "__")) and e.name not in IGNORED_NAMES]
        held = sum(1 for e in entries if e.name in names and e.is_file())
        if held:
            folders.append((depth, -held, str(here), here))
        singles += [e for e in entries if e.is_file() and e.suffix.lower() in (".py", ".ipynb")]
        if depth < SEARCH_DEPTH:
            todo += [(e, depth + 1) for e in entries if e.is_dir() and not e.is_symlink()]
    if folders:
        return min(folders)[3]
    return singles[0] if len(singles) == 1 else (folder if singles else None)


def autograde(root: Path, course: Course, *, lang: str, isolation: Isolation) -> Autograded:
    """Grade ``root/submission`` as Gradescope lays it out; ``root/results/results.json`` is
    written whatever happens: a grader that fails still gives the learner a page that says so."""
    started = time.monotonic()
    found = find_submission(root / "submission", course.modules.values())
    target = found or root / "submission"
    try:
        report = grade_or_failed(target, course, lang=lang, launcher=ExecLauncher(isolation=isolation))
    except GraderError as exc:  # no submission folder at all, say: still a page
        unavailable(root, lang, str(exc))
        raise
    write_yaml(report, root / "results" / "report.yaml")
    data = results_of(report, course, execution_time=time.monotonic() - started)
    if found is None:
        data["output"] = messages.ui(lang, "gradescope.nothing_submitted") + "\n" + data["output"]
    results = _page_path(root)
    _write_page(results, data)
    if report.output:  # run_autograder's stdout: Gradescope shows it as stdout_visibility says
        sys.stdout.write(report.output + ("" if report.output.endswith("\n") else "\n"))
    return Autograded(results, report.score, report.grader_error)


def unavailable_results(lang: str, reason: str) -> dict[str, Any]:
    """The results.json of a grader that cannot grade at all (a broken course or install)."""
    text = messages.ui(lang, "gradescope.unavailable").format(reason=cut(reason, 300))
    return {"score": 0.0, "execution_time": 0.0, "output": text, "output_format": "text",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": []}


def unavailable(root: Path, lang: str, reason: str) -> Path:
    """Write that page where Gradescope reads it."""
    results = _page_path(root)
    _write_page(results, unavailable_results(lang, reason))
    return results
