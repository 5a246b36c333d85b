"""Turn what the sandbox saw into scored results: points, statuses, messages, hints."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Iterable, Mapping

from grader.course import Course, Exercise, Lang
from grader.errors import GraderFailure
from grader.intake.names import shown
from grader.intake.submission import LoadProblem, Submission
from grader.score import texts
from grader.score.results import (
    CheckOutcome,
    CheckResult,
    DeviceInfo,
    ExerciseResult,
    ExerciseStatus,
    IsolationInfo,
    Report,
    TopLevelStop,
)
from grader.wire.messages import CellStop, CheckStatus, Limits, Source

# A file that cannot be used is an error, except an empty one: nothing was attempted.
_PROBLEM_STATUS: dict[str, CheckStatus] = {
    "undecodable": "error", "bad_notebook": "error", "unsupported": "error", "empty": "not_attempted",
    "link": "error", "too_large": "error",
}
_MISSING_MODULE = re.compile(r"No module named '([^']+)'")


def problem_outcome(check_id: str, problem: LoadProblem) -> CheckOutcome:
    where = problem.origin
    if problem.cell is not None:
        where += f", cell {problem.cell}"
    if problem.line is not None:
        where += f", line {problem.line}"
    return CheckOutcome(check_id, _PROBLEM_STATUS[problem.kind], f"load_{problem.kind}",
                        {"where": where, "detail": problem.detail}, "static")


# How many of a folder's other files an absent exercise's message names.
OTHERS_SHOWN = 5


def absent_outcome(check_id: str, exercise: Exercise, submission: Submission) -> CheckOutcome:
    """No file for the exercise; in a folder that holds other .py or .ipynb files, the message names
    them (the learner's file under a name the grader does not take, "bai1.py")."""
    expected = f"{exercise.module}.py / {exercise.module}.ipynb" if submission.path.is_dir() else exercise.module
    if not submission.others:
        return CheckOutcome(check_id, "not_attempted", "absent", {"expected": expected}, "static")
    found = ", ".join(submission.others[:OTHERS_SHOWN]) + (", …" if len(submission.others) > OTHERS_SHOWN else "")
    return CheckOutcome(check_id, "not_attempted", "absent_others", {"expected": expected, "found": found}, "static")


def _sources_by_module(submission: Submission) -> dict[str, Source]:
    return {source.module: source for source in submission.sources.values()}


# The Python the learner's code ran on: the grader's own, which starts the learner process (a cell that compiled
# on the learner's newer Python may not here: top_level.syntax_error).
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def stop_where(source: Source | None, stop: CellStop) -> str:
    """Where a cell stopped, as the learner finds it: "bai14.ipynb, In [8], line 2" or "bai.py, line 12"."""
    if source is None or not 0 <= stop.index < len(source.cells):
        return stop.label
    cell = source.cells[stop.index]
    if not source.numbered:
        return f"{source.origin}, line {cell.start + (stop.line or 1) - 1}"
    return f"{source.origin}, {cell.label}" + (f", line {stop.line}" if stop.line else "")


def top_level_stops(submission: Submission, stops: Iterable[CellStop], lang: Lang,
                    limits: Limits) -> tuple[TopLevelStop, ...]:
    """The learner's stopped cells as the report shows them, in the submission's order."""
    sources = _sources_by_module(submission)
    order = {module: n for n, module in enumerate(sources)}
    found = []
    for stop in sorted(stops, key=lambda s: (order.get(s.module, len(order)), s.index)):
        where = stop_where(sources.get(stop.module), stop)
        missing = _MISSING_MODULE.search(stop.error)
        params = {"where": where, "error": stop.error, "limit": f"{limits.cell_timeout_s:g}",
                  "budget": f"{limits.top_level_timeout_s:g}", "module": missing[1] if missing else "?",
                  "python": PYTHON}
        message = texts.render(lang, f"top_level.{stop.kind}", params)
        if stop.kept:
            message += " " + texts.render(lang, "top_level.kept", {"kept": ", ".join(stop.kept)})
        found.append(TopLevelStop(where, stop.kind, stop.error, message, stop.kept))
    return tuple(found)


def explain_missing(outcomes: Mapping[str, CheckOutcome], submission: Submission,
                    stops: Iterable[CellStop]) -> dict[str, CheckOutcome]:
    """A function "not attempted" because the cell that defines it stopped is an error there, not
    a mystery: the check says which cell and why (a syntax error, a failing decorator)."""
    sources = _sources_by_module(submission)
    stops = list(stops)
    explained = dict(outcomes)
    for check_id, outcome in outcomes.items():
        function = outcome.params.get("function", "")
        if outcome.status != "not_attempted" or not function.isidentifier():
            continue
        defines = re.compile(rf"^\s*(async\s+def|def|class)\s+{re.escape(function)}\b|^{re.escape(function)}\s*[:=]",
                             re.MULTILINE)
        for stop in stops:
            source = sources.get(stop.module)
            if source is None or function in stop.kept or not 0 <= stop.index < len(source.cells):
                continue
            if defines.search(source.cell_text(source.cells[stop.index])):
                params = {"function": function, "where": stop_where(source, stop), "error": stop.error}
                explained[check_id] = dataclasses.replace(outcome, status="error", message_id="function_not_defined",
                                                          params=params)
                break
    return explained


# Why a check's time ran out before it could say more: the run's wall clock, or an import it was in.
_OUT_OF_TIME = ("run_timeout", "import_timeout")


def never_named(outcomes: Mapping[str, CheckOutcome], exercises: Iterable[Exercise],
                submission: Submission) -> dict[str, CheckOutcome]:
    """A check cut by the run's wall clock (or inside an import) is ``not_attempted``, not a
    timeout, when no text of the submission names any of its exercise's functions: code that never
    names a function cannot define it, so the check could only ever have said "not attempted".

    Without this the verdict depended on the machine's load: a learner whose whole file is
    ``while True: pass`` is stopped at its cell's limit (10 s), and then the judge asks for each of
    the 35 checks' functions; with ``run_timeout_s: 30``, 17 s of the clock were spent on a machine
    at load 6, and under heavier load (CI, two gradings beside it) the clock ran out first and the
    checks left said ``timeout``. A name found anywhere, even in a comment or a string (code that
    builds it), keeps the timeout: this rule only ever removes a verdict that could not be earned."""
    texts_of = [source.text for source in submission.sources.values()]
    changed = dict(outcomes)
    for ex in exercises:
        if any(re.search(rf"\b{re.escape(name)}\b", text) for name in ex.functions for text in texts_of):
            continue
        for check in ex.checks:
            outcome = changed.get(check.id)
            if outcome is not None and outcome.status == "timeout" and outcome.message_id in _OUT_OF_TIME:
                changed[check.id] = CheckOutcome(check.id, "not_attempted", "not_attempted",
                                                 {"function": ", ".join(ex.functions)}, "static")
    return changed


def exercise_status(checks: tuple[CheckResult, ...], score: float, max_score: float) -> ExerciseStatus:
    statuses = {c.status for c in checks}
    if statuses <= {"not_attempted"}:
        return "not_attempted"
    if statuses == {"skipped"}:  # not graded: the grader could not run its checks
        return "error"
    if score >= max_score - 1e-9:
        return "passed"
    if score > 0:
        return "partial"
    if "timeout" in statuses:
        return "timeout"
    if "error" in statuses:
        return "error"
    return "failed"


def score_exercise(exercise: Exercise, outcomes: Mapping[str, CheckOutcome], lang: Lang) -> ExerciseResult:
    results = []
    for spec in exercise.checks:
        outcome = outcomes.get(spec.id) or CheckOutcome(spec.id, "error", "child_failed", {"code": "?"})
        passed = outcome.status == "passed"
        results.append(CheckResult(
            id=spec.id,
            status=outcome.status,
            points=spec.points if passed else 0.0,
            max_points=spec.points,
            message="" if passed else texts.render(lang, outcome.message_id, outcome.params),
            hint=("" if passed or outcome.status in ("not_attempted", "skipped")
                  else texts.hint(lang, spec.test_file)),
            mode=outcome.mode,
            visibility=spec.visibility,
            duration_s=outcome.duration_s,
            devices=outcome.devices,
        ))
    checks = tuple(results)
    score = sum(c.points for c in checks)
    return ExerciseResult(exercise.id, exercise.title[lang], exercise_status(checks, score, exercise.max_score),
                          score, exercise.max_score, checks)


def failure_text(failure: GraderFailure, lang: Lang) -> str:
    return texts.render(lang, f"grader_error.{failure.kind}", {"error": failure.error})


def build_report(course: Course, submission: Submission, exercises: tuple[Exercise, ...],
                 outcomes: Mapping[str, CheckOutcome], *, device: DeviceInfo, lang: Lang, seconds: float,
                 version: str, notes: tuple[str, ...] = (), output: str = "",
                 failure: GraderFailure | None = None, top_level: tuple[TopLevelStop, ...] = (),
                 isolation: IsolationInfo | None = None, learner_seconds: float = 0.0, seed: int = 0) -> Report:
    """The scored report. With ``failure`` the grader could not grade at all: every check is
    skipped, whatever ``outcomes`` hold, and the report names the cause."""
    reason = ""
    if failure is not None:
        reason = failure_text(failure, lang)
        outcomes = {c.id: CheckOutcome(c.id, "skipped", "not_graded", {"reason": reason}, "static")
                    for ex in exercises for c in ex.checks}
        notes = (*notes, "grader_failed") if "grader_failed" not in notes else notes
    scored = tuple(score_exercise(ex, outcomes, lang) for ex in exercises)
    return Report(
        learner=submission.learner,
        submission=shown(str(submission.path)),
        submitted_as=submission.submitted_as or shown(submission.path.name),
        score=sum(e.score for e in scored),
        max_score=sum(e.max_score for e in scored),
        device=device,
        exercises=scored,
        lang=lang,
        grading_seconds=round(seconds, 2),
        learner_seconds=learner_seconds,
        grader_version=version,
        notes=notes,
        output=output,
        grader_error=reason,
        top_level=top_level if failure is None else (),
        isolation=isolation or IsolationInfo(),
        seed=seed,
    )
