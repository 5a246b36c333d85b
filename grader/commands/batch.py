"""Grade a folder of submissions: one report per learner, a gradebook, a class summary.

Every entry directly in the submissions folder is one learner, whatever its name, under an id
of grader/intake/names.py. Each learner's report is written (atomically) the moment that learner
is done, and the gradebook is rewritten after every learner, so an interrupted run keeps a valid
gradebook of what it finished. A report carries the hashes of the submission and of the course it
was graded against; a re-run grades only the learners whose report is missing or stale.

One learner never stops another: whatever goes wrong while grading or writing one learner — a
grader bug, a report the output folder refuses — becomes that learner's ``grader_error`` row, the
batch goes on, and it ends with exit code 3. ``wall_clock_s`` (``--learner-timeout``) bounds each
learner's share of the run, so one that sleeps just under every deadline holds a worker that long,
not the course's ``run_timeout_s``.

Workers are threads: each grade spends its time waiting on its sandboxed child process.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tqdm import tqdm

from grader import __version__
from grader.course import Course, Lang
from grader.errors import GraderError
from grader.grading import failed_report, grade
from grader.intake.discover import Learner, course_sha256, discover, submission_sha256
from grader.intake.names import shown
from grader.outputs.gradebook import GRADEBOOK, gradebook_csv, score_cell
from grader.outputs.report import write_atomic
from grader.outputs.seal import Stamp, StoredReport, load_report, seal_intact, seal_key, sealed, write_stored
from grader.outputs.summary import SUMMARY_STEM, summarize, write_summary
from grader.run.isolation import NONE, Isolation, probe
from grader.run.launch import Launcher, launcher_for_batch
from grader.run.share import machine_share
from grader.score.results import Report
from grader.wire.messages import RequestedDevice

Outcome = Literal["graded", "failed"]


@dataclass(frozen=True)
class Shard:
    """The ``index``-th (1-based) of ``count`` contiguous slices of the learners sorted by name."""

    index: int
    count: int

    def pick(self, learners: Sequence[Learner]) -> list[Learner]:
        total = len(learners)
        start = (self.index - 1) * total // self.count
        end = self.index * total // self.count
        return list(learners[start:end])


@dataclass(frozen=True)
class BatchResult:
    learners: int
    graded: int  # graded in this run
    current: int  # report already up to date
    failed: int  # grading itself broke: a zero-score report says why
    out_dir: Path


def parse_shard(text: str, where: str = "--shard") -> Shard:
    index, sep, count = text.partition("/")
    try:
        shard = Shard(int(index), int(count))
    except ValueError:
        raise GraderError(f"{where}: {text!r} must be K/N, for example 2/8") from None
    if not sep or shard.count < 1 or not 1 <= shard.index <= shard.count:
        raise GraderError(f"{where}: {text!r} must be K/N with 1 <= K <= N")
    return shard


def report_path(out_dir: Path, learner: str) -> Path:
    return out_dir / f"{learner}.yaml"


def is_current(stored: StoredReport | None, stamp: Stamp, key: bytes, learner: str = "",
               wall_clock_s: float = math.inf) -> bool:
    """Whether a learner's report on disk stands: graded from this submission and course, by this
    grader, in this language, sealed by this output folder's key, under this learner's id, not a
    grader failure, and not stopped by a wall-clock bound shorter than this run's (``wall_clock_s``)."""
    if stored is None or stored.report.grader_error or "grader_failed" in stored.report.notes:
        return False
    if learner and stored.report.learner != learner:
        return False
    cut_short = "wall_clock_limit" in stored.report.notes
    if cut_short and wall_clock_s > stored.report.learner_seconds + 1.0:
        return False
    return stored.stamp == stamp and seal_intact(stored, key)


class _Book:
    """The reports of this run so far; rewrites the gradebook after each learner (thread-safe)."""

    def __init__(self, out_dir: Path, exercise_ids: Sequence[str]) -> None:
        self.out_dir = out_dir
        self.exercise_ids = exercise_ids
        self.reports: dict[str, Report] = {}
        self.lock = threading.Lock()

    def keep(self, report: Report) -> None:
        """A report that is already on disk and up to date."""
        with self.lock:
            self.reports[report.learner] = report

    def add(self, report: Report | None) -> None:
        with self.lock:
            if report is not None:
                self.reports[report.learner] = report
            write_atomic(self.out_dir / GRADEBOOK, gradebook_csv(self.reports.values(), self.exercise_ids))


class Batch:
    """One ``grader batch`` run; ``run()`` grades what is stale and writes the class files."""

    def __init__(self, course: Course, out_dir: Path, *, device: RequestedDevice = "auto", lang: Lang = "vi",
                 workers: int = 1, force: bool = False, progress: bool = True, fork: bool = True,
                 isolation: Isolation = NONE, wall_clock_s: float | None = None) -> None:
        self.course, self.out_dir = course, out_dir
        self.isolation = isolation
        self.wall_clock_s = wall_clock_s
        self.device, self.lang = device, lang
        self.workers, self.force, self.progress, self.fork = workers, force, progress, fork
        self.course_hash = course_sha256(course)
        self.book = _Book(out_dir, course.exercise_ids)
        self.key = b""  # the output folder's seal key, read (or made) when the run starts

    def stamp(self, learner: Learner) -> Stamp:
        """What a batch adds to a report; a re-run compares it to decide what to regrade."""
        return Stamp(submission_sha256(learner.path), self.course_hash, __version__, self.lang, self.device)

    def grade(self, learner: Learner, stamp: Stamp, launcher: Launcher) -> tuple[Outcome, Report]:
        """Grade one learner and write their report; never raises, whatever the learner or the
        output folder does: what goes wrong is this learner's grader_error row."""
        try:
            report = grade(learner.path, self.course, device=self.device, lang=self.lang, launcher=launcher,
                           wall_clock_s=self.wall_clock_s)
        except Exception as exc:  # noqa: BLE001 - one learner's grading bug must not stop the class
            report = failed_report(learner.path, self.course, f"{type(exc).__name__}: {exc}", self.lang)
        report = dataclasses.replace(report, learner=learner.id, submitted_as=learner.submitted_as)
        try:
            write_stored(report_path(self.out_dir, learner.id), sealed(StoredReport(report, stamp), self.key))
        except (OSError, ValueError) as exc:  # the output folder refused it: kept as an error row
            reason = f"the report could not be written ({type(exc).__name__}: {exc})"
            report = dataclasses.replace(failed_report(learner.path, self.course, reason, self.lang),
                                         learner=learner.id, submitted_as=learner.submitted_as)
        outcome: Outcome = "graded"
        if report.grader_error:  # kept on record, and regraded by the next run
            tqdm.write(f"grader: {learner.id}: not graded: {shown(report.grader_error)}", file=sys.stderr)
            outcome = "failed"
        try:
            self.book.add(report)  # here, not in the main thread: a report on disk is in the gradebook too
        except OSError as exc:
            tqdm.write(f"grader: gradebook.csv could not be written ({shown(str(exc))})", file=sys.stderr)
            outcome = "failed"
        return outcome, report

    def run(self, learners: Sequence[Learner]) -> BatchResult:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.key = seal_key(self.out_dir, create=True) or b""
        book = self.book
        todo: list[tuple[Learner, Stamp]] = []
        for learner in learners:
            stamp = self.stamp(learner)
            old = load_report(report_path(self.out_dir, learner.id))
            bound = self.wall_clock_s or self.course.limits.run_timeout_s
            if old is not None and not self.force and is_current(old, stamp, self.key, learner.id, bound):
                book.keep(old.report)
            else:
                todo.append((learner, stamp))
        current = len(learners) - len(todo)
        book.add(None)
        counts = {"graded": 0, "failed": 0}
        bar = tqdm(total=len(learners), initial=current, unit="learner", desc="grading", file=sys.stderr,
                   disable=not self.progress, dynamic_ncols=True)
        # Each worker forks its processes from servers that imported torch once, for the batch's lifetime.
        with launcher_for_batch(self.fork, machine_share(self.workers, os.environ), self.isolation) as launcher:
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grade")
            try:
                futures = {pool.submit(self.grade, learner, stamp, launcher): learner for learner, stamp in todo}
                for future in concurrent.futures.as_completed(futures):
                    outcome, report = future.result()
                    counts[outcome] += 1
                    # An id is printable and short; the bar cuts it further to keep to one line.
                    bar.set_postfix_str(f"{futures[future].id[:30]}: {score_cell(report.score)}", refresh=False)
                    bar.update(1)
            finally:
                # On Ctrl-C: drop what has not started, let the running grades write their reports.
                pool.shutdown(wait=True, cancel_futures=True)
                bar.close()
                write_summary(summarize(book.reports.values(), self.course), self.out_dir)
        return BatchResult(len(learners), counts["graded"] + counts["failed"], current, counts["failed"],
                           self.out_dir)


def run_batch(submissions: Path, out_dir: Path, course: Course, *, workers: int = 1, force: bool = False,
              device: RequestedDevice = "auto", lang: Lang = "vi", shard: Shard | None = None,
              progress: bool = True, fork: bool = True, isolation: Isolation | None = None,
              wall_clock_s: float | None = None) -> BatchResult:
    """``fork``: fork each run's processes from warm servers (``grader batch --no-fork-server``:
    exec each, a fresh Python every time, slower, same verdicts); ``isolation`` None: what this
    machine offers (grader/run/isolation.py); ``wall_clock_s``: each learner's bound
    (``--learner-timeout``), else the course's ``limits.run_timeout_s``."""
    if workers < 1:
        raise GraderError(f"--workers: {workers!r} must be at least 1")
    if out_dir.resolve() == submissions.resolve():
        raise GraderError(f"-o {out_dir}: write the reports outside the submissions folder")
    # An output folder inside the submissions folder is not a learner.
    learners = discover(submissions, skip=out_dir)
    if shard is not None:
        learners = shard.pick(learners)
    return Batch(course, out_dir, device=device, lang=lang, workers=workers, force=force, progress=progress,
                 fork=fork, isolation=isolation or probe(), wall_clock_s=wall_clock_s).run(learners)


def merge(dirs: Sequence[Path], out_dir: Path, course: Course) -> int:
    """Gather the learner reports of several batch outputs (shards) into one output folder.

    Each report is read back typed and checked against its own folder's seal; the merged folder
    reseals what it keeps with its own key. A report whose seal does not hold is not merged: its
    shard must be re-run (the message says which)."""
    found: dict[str, tuple[Path, StoredReport]] = {}
    for folder in dirs:
        if not folder.is_dir():
            raise GraderError(f"merge: not a folder: {folder}")
        key = seal_key(folder, create=False)
        for path in sorted(folder.glob("*.yaml")):
            if path.stem == SUMMARY_STEM:
                continue
            stored = load_report(path)
            if stored is None:
                raise GraderError(f"merge: {path} is not a grader report")
            if key is None or not seal_intact(stored, key):
                raise GraderError(f"merge: {path} was changed after the grader wrote it (its seal does not match); "
                                  f"re-run the batch that wrote {folder}")
            name = stored.report.learner
            if name in found and found[name][0].resolve() != path.resolve():
                raise GraderError(f"merge: learner {name!r} is in both {found[name][0]} and {path}; "
                                  "remove the stale one")
            found[name] = (path, stored)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = seal_key(out_dir, create=True) or b""
    for _, stored in found.values():
        write_stored(report_path(out_dir, stored.report.learner), sealed(stored, key))
    reports = [stored.report for _, stored in found.values()]
    versions = {(stored.stamp.course_sha256 if stored.stamp else "?")[:12] for _, stored in found.values()}
    if len(versions) > 1:
        print(f"grader: warning: the merged reports were graded against {len(versions)} different versions of "
              f"the course or checks ({', '.join(sorted(versions))}); re-run the shards to grade everyone alike",
              file=sys.stderr)
    write_atomic(out_dir / GRADEBOOK, gradebook_csv(reports, course.exercise_ids))
    write_summary(summarize(reports, course), out_dir)
    return len(reports)
