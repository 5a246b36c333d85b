"""``grader autograde``: grade one Gradescope submission, as the autograder package's
``run_autograder`` calls it (grader/commands/gradescope_zip.py builds that package).

It finds the learner's files in what Gradescope handed over, grades them, and always writes
``results/results.json`` (grader/outputs/gradescope.py): a grader that fails still gives the
learner a page that says so.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.course import Course, Lang
from grader.errors import GraderError
from grader.grading import grade_or_failed
from grader.intake.submission import IGNORED_NAMES
from grader.outputs.gradescope import page_path, results_of, unavailable_results, write_page
from grader.outputs.report import write_yaml
from grader.run.isolation import Isolation
from grader.run.launch import grading_launcher
from grader.score import texts

SEARCH_DEPTH = 4  # how deep a submission's files may sit in what Gradescope hands over


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


def autograde(root: Path, course: Course, *, lang: Lang, isolation: Isolation) -> Autograded:
    """Grade ``root/submission`` as Gradescope lays it out; ``root/results/results.json`` is
    written whatever happens: a grader that fails still gives the learner a page that says so."""
    started = time.monotonic()
    found = find_submission(root / "submission", course.modules.values())
    target = found or root / "submission"
    try:
        with grading_launcher(isolation) as launcher:
            report = grade_or_failed(target, course, lang=lang, launcher=launcher)
    except GraderError as exc:  # no submission folder at all, say: still a page
        unavailable(root, lang, str(exc))
        raise
    write_yaml(report, root / "results" / "report.yaml")
    data = results_of(report, course, execution_time=time.monotonic() - started)
    if found is None:
        data["output"] = texts.ui(lang, "gradescope.nothing_submitted") + "\n" + data["output"]
    results = page_path(root)
    write_page(results, data)
    if report.output:  # run_autograder's stdout: Gradescope shows it as stdout_visibility says
        sys.stdout.write(report.output + ("" if report.output.endswith("\n") else "\n"))
    return Autograded(results, report.score, report.grader_error)


def unavailable(root: Path, lang: Lang, reason: str) -> Path:
    """Write that page where Gradescope reads it."""
    results = page_path(root)
    write_page(results, unavailable_results(lang, reason))
    return results
