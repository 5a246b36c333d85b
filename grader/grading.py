"""Grade one submission: load it, run its checks in the sandbox, score it.

The grader's process only reads files and talks to the judge (grader/run/sandbox.py); when grading
itself breaks, the learner still gets a zero-score report that says why.
"""

from __future__ import annotations

import dataclasses
import os
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

from grader import __version__
from grader.course import CheckSpec, Course, Lang, Visibility
from grader.errors import GraderError, GraderFailure
from grader.intake.names import learner_id, shown, submitted_as
from grader.intake.submission import MiB, Submission, load_submission
from grader.run.isolation import probe
from grader.run.lanes import lanes_of, run_in_lanes
from grader.run.launch import Launcher, grading_launcher
from grader.score.results import CheckOutcome, DeviceInfo, IsolationInfo, Report, TopLevelStop
from grader.score.scoring import (
    absent_outcome,
    build_report,
    explain_missing,
    never_named,
    problem_outcome,
    top_level_stops,
)
from grader.wire.messages import RequestedDevice

UNKNOWN_DEVICE = DeviceInfo("unknown", "unknown", "unknown")


def grade(path: Path, course: Course, *, device: RequestedDevice = "auto", lang: Lang = "vi",
          visibility: Iterable[Visibility] = ("public", "hidden"),
          exercises: Iterable[str] | None = None, launcher: Launcher | None = None,
          wall_clock_s: float | None = None, seed: int | None = None, lanes: int = 1) -> Report:
    """Grade the submission at ``path``; its processes start with ``launcher`` (grader/run/launch.py;
    by default ``grading_launcher``, isolated as this machine allows; a batch passes its fork servers).
    ``lanes``: how many of the course's lanes may run at once (grader/run/lanes.py; ``grader grade`` on a
    machine with a free core, from ``launcher``'s warm servers; a batch grades learners side by side, and
    only its last in lanes, grader/commands/batch.py ``_Tail``). ``wall_clock_s``: the instructor's bound on
    this learner's whole grading (``--learner-timeout``), instead of the course's ``limits.run_timeout_s``.
    ``seed``: the grading's secret, from which the checks draw their problems (grader/reference/draws.py);
    None draws a new one here, from the operating system, and the report says which, so that ``--seed``
    regrades identically."""
    if launcher is None:
        with grading_launcher(probe(), lanes) as own:
            return grade(path, course, device=device, lang=lang, visibility=visibility, exercises=exercises,
                         launcher=own, wall_clock_s=wall_clock_s, seed=seed, lanes=lanes)
    started = time.monotonic()
    seed = new_seed() if seed is None else seed
    limits = course.limits if wall_clock_s is None else dataclasses.replace(course.limits, run_timeout_s=wall_clock_s)
    submission = load_submission(path, course.modules, max_bytes=limits.submission_mb * MiB)
    wanted = set(exercises) if exercises is not None else set(course.exercise_ids)
    visible = set(visibility)
    # The exercises asked for, each with only the checks of the visibility asked for.
    chosen = tuple(dataclasses.replace(ex, checks=tuple(c for c in ex.checks if c.visibility in visible))
                   for ex in course.exercises if ex.id in wanted)
    outcomes: dict[str, CheckOutcome] = {}
    to_run: list[CheckSpec] = []
    for ex in chosen:
        for check in ex.checks:
            if ex.id in submission.problems:
                outcomes[check.id] = problem_outcome(check.id, submission.problems[ex.id])
            elif ex.id not in submission.sources:
                outcomes[check.id] = absent_outcome(check.id, ex, submission)
            else:
                to_run.append(check)
    device_info = UNKNOWN_DEVICE
    notes: tuple[str, ...] = ()
    output = ""
    failure: GraderFailure | None = None
    top_level: tuple[TopLevelStop, ...] = ()
    learner_seconds = 0.0
    if to_run:
        # Every module the submission has: those of the exercises asked for run their top level, the others
        # only if one of them imports it (grader/run/sandbox.py ``start_message``).
        sources = dict(submission.sources)
        run = run_in_lanes(sources, lanes_of(to_run, course.lanes, sources, lanes), device=device, limits=limits,
                           launcher=launcher, seed=seed, helpers=submission.helpers)
        outcomes.update(never_named(explain_missing(run.outcomes, submission, run.stops), chosen, submission))
        top_level = top_level_stops(submission, run.stops, lang, limits)
        device_info = run.device or UNKNOWN_DEVICE
        notes = (*run.notes, "wall_clock_limit") if run.out_of_time else run.notes
        # What the learner's code printed: kept line by line, every other control character shown.
        output = shown(run.output, keep="\n\t")
        failure = run.grader_error
        learner_seconds = run.learner_seconds
    return build_report(course, submission, chosen, outcomes, device=device_info, lang=lang,
                        seconds=time.monotonic() - started, version=__version__, notes=notes,
                        output=output, failure=failure, top_level=top_level,
                        isolation=IsolationInfo(launcher.isolation.mode, launcher.isolation.missing),
                        learner_seconds=learner_seconds, seed=seed)


def new_seed() -> int:
    """A grading's secret, from the operating system's randomness in the grader's own process: 48
    bits, so that two gradings practically never share their problems."""
    return int.from_bytes(os.urandom(6), "big")


def failed_report(path: Path, course: Course, reason: str, lang: Lang) -> Report:
    """Grading itself broke (a bug in the grader's process): every check is skipped, with the reason."""
    name = path.name or path.resolve().name
    submission = Submission(learner_id(name, is_dir=path.is_dir() and not path.is_symlink()), path, {}, {},
                            submitted_as(name))
    return build_report(course, submission, course.exercises, {}, device=UNKNOWN_DEVICE, lang=lang,
                        seconds=0.0, version=__version__, failure=GraderFailure("internal", reason))


def grade_or_failed(path: Path, course: Course, *, device: RequestedDevice = "auto", lang: Lang = "vi",
                    launcher: Launcher, wall_clock_s: float | None = None, seed: int | None = None,
                    lanes: int = 1) -> Report:
    """``grade()``, and when the grader itself breaks (a bug), the traceback on stderr and a
    zero-score report that says why, never a traceback instead of a report. A GraderError (a
    usage error, the user's to fix) still raises."""
    try:
        return grade(path, course, device=device, lang=lang, launcher=launcher, wall_clock_s=wall_clock_s, seed=seed,
                     lanes=lanes)
    except GraderError:
        raise
    except Exception as exc:  # noqa: BLE001 - a grader bug still leaves a report behind
        traceback.print_exc()
        return failed_report(path, course, f"{type(exc).__name__}: {exc}", lang)
