"""Turn what the sandbox saw into scored results: points, statuses, messages, hints."""

from __future__ import annotations

from collections.abc import Mapping

from grader import messages
from grader.course import Course, Exercise
from grader.errors import GraderFailure
from grader.results import CheckResult, CheckStatus, DeviceInfo, ExerciseResult, ExerciseStatus, Report
from grader.sandbox import CheckOutcome
from grader.submission import LoadProblem, Submission

# A file that cannot be used is an error, except an empty one: nothing was attempted.
_PROBLEM_STATUS: dict[str, CheckStatus] = {
    "syntax_error": "error", "undecodable": "error", "bad_notebook": "error", "unsupported": "error",
    "empty": "not_attempted",
}


def problem_outcome(check_id: str, problem: LoadProblem) -> CheckOutcome:
    where = problem.origin
    if problem.cell is not None:
        where += f", cell {problem.cell}"
    if problem.line is not None:
        where += f", line {problem.line}"
    return CheckOutcome(check_id, _PROBLEM_STATUS[problem.kind], f"load_{problem.kind}",
                        {"where": where, "detail": problem.detail}, "static")


def absent_outcome(check_id: str, exercise: Exercise, submission: Submission) -> CheckOutcome:
    expected = f"{exercise.module}.py / {exercise.module}.ipynb" if submission.path.is_dir() else exercise.module
    return CheckOutcome(check_id, "not_attempted", "absent", {"expected": expected}, "static")


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


def score_exercise(exercise: Exercise, outcomes: Mapping[str, CheckOutcome], lang: str) -> ExerciseResult:
    results = []
    for spec in exercise.checks:
        outcome = outcomes.get(spec.id) or CheckOutcome(spec.id, "error", "child_failed", {"code": "?"})
        passed = outcome.status == "passed"
        results.append(CheckResult(
            id=spec.id,
            status=outcome.status,
            points=spec.points if passed else 0.0,
            max_points=spec.points,
            message="" if passed else messages.render(lang, outcome.message_id, outcome.params),
            hint="" if passed or outcome.status in ("not_attempted", "skipped") else messages.hint(lang, spec.id),
            mode=outcome.mode,
            visibility=spec.visibility,
            duration_s=outcome.duration_s,
        ))
    checks = tuple(results)
    score = sum(c.points for c in checks)
    return ExerciseResult(exercise.id, exercise.title[lang], exercise_status(checks, score, exercise.max_score),
                          score, exercise.max_score, checks)


def failure_text(failure: GraderFailure, lang: str) -> str:
    return messages.render(lang, f"grader_error.{failure.kind}", {"error": failure.error})


def build_report(course: Course, submission: Submission, exercises: tuple[Exercise, ...],
                 outcomes: Mapping[str, CheckOutcome], *, device: DeviceInfo, lang: str, seconds: float,
                 version: str, notes: tuple[str, ...] = (), output: str = "",
                 failure: GraderFailure | None = None) -> Report:
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
        submission=str(submission.path),
        score=sum(e.score for e in scored),
        max_score=sum(e.max_score for e in scored),
        device=device,
        exercises=scored,
        lang=lang,
        grading_seconds=round(seconds, 2),
        grader_version=version,
        notes=notes,
        output=output,
        grader_error=reason,
    )
