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

Workers are threads: each grade spends its time waiting on its sandboxed child process. A grading keeps
one core busy (its judge and learner process take turns), so the class's last learner to start, once
another has ended, may run the course's lanes side by side where ``grader grade`` would (``_Tail``): the
cores the ended workers leave idle grade the rest of it, instead of waiting for one worker's last learner.

With a roster (``--roster``), each entry of the submissions folder is matched to a learner of the
roster (grader/intake/roster.py): the learner's reports and gradebook row carry their roster id,
a learner whose submission came as several entries (one per uploaded file) is graded from a
folder staged in the output folder (``.staged/<id>``), and the class list is written first
(``roster.yaml``, grader/outputs/classlist.py), for the gradebook, the summary, ``grader merge``
and ``grader export``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tqdm import tqdm

from grader import __version__
from grader.course import Course, Lang
from grader.errors import GraderError
from grader.grading import failed_report, grade
from grader.intake.discover import Learner, course_sha256, discover, stage, submission_sha256
from grader.intake.downloads import GRADESCOPE_METADATA, claim, gradescope_metadata
from grader.intake.names import shown
from grader.intake.roster import assign, match, read_roster
from grader.outputs.classlist import (
    RECORD_STEM,
    ClassRecord,
    MissingPolicy,
    as_dict,
    load_record,
    record_of,
    write_record,
)
from grader.outputs.gradebook import GRADEBOOK, gradebook_csv, score_cell
from grader.outputs.report import write_atomic
from grader.outputs.seal import Stamp, StoredReport, load_report, seal_intact, seal_key, sealed, write_stored
from grader.outputs.summary import SUMMARY_STEM, summarize, write_summary
from grader.run.isolation import NONE, Isolation, probe
from grader.run.launch import FRESH, Launcher, Launchers
from grader.run.share import machine_share
from grader.score.results import Report
from grader.wire.messages import RequestedDevice

# The class files an output folder holds beside the learners' reports (never a learner's id:
# grader/intake/names.py RESERVED).
CLASS_FILES = frozenset({SUMMARY_STEM, Path(GRADEBOOK).stem, RECORD_STEM})
STAGING_DIR = ".staged"  # in the output folder: the staged submissions of learners with several entries

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
    record: ClassRecord | None = None  # the class list, with --roster


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


@dataclass(frozen=True)
class RosterOptions:
    """``--roster``, ``--roster-encoding`` and ``--missing``."""

    path: Path
    encoding: str | None = None
    missing: MissingPolicy = "empty"


class _Book:
    """The reports of this run so far; rewrites the gradebook after each learner (thread-safe)."""

    def __init__(self, out_dir: Path, exercise_ids: Sequence[str], max_score: float,
                 record: ClassRecord | None) -> None:
        self.out_dir = out_dir
        self.exercise_ids = exercise_ids
        self.max_score = max_score
        self.record = record
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
            write_atomic(self.out_dir / GRADEBOOK, gradebook_csv(self.reports.values(), self.exercise_ids,
                                                                  self.max_score, self.record))


class _Tail:
    """Which learner of a batch runs the course's lanes side by side (grader/run/lanes.py): the last to start,
    once a learner has ended, where every learner still being graded is a quarter done or more.

    A grading keeps one core busy (its judge and learner process take turns). On 2 cores and 2 workers, one
    worker may idle at the class's end for up to a whole grading (0.45 s of a 0.6 s grading in one class of 16
    measured; identical learners mostly stay in step); in two lanes a grading costs ~5 % more CPU for ~40 %
    less wall. But lanes beside a grading that has only begun share
    the cores three ways until the lanes end, and that grading then ends alone, later than the class would
    have without them (measured: 0.85 s instead of 0.6, the two last learners started 30 ms apart). With
    T a grading's wall and x what the other has left, lanes end the class about (T - x) / 2 sooner where x
    is under half of T and later once x passes three quarters of T: ``start`` asks that every grading
    under way has run a quarter of the mean of those that ended. A class no larger than its workers
    starts every learner at once: none in lanes."""

    QUARTER = 0.25

    def __init__(self, learners: int, lanes: int) -> None:
        self._lock = threading.Lock()
        self._waiting = learners
        self._started: dict[int, float] = {}  # the gradings under way: when each started (by ticket)
        self._ended: list[float] = []  # how long each ended grading took
        self._lanes = lanes  # what this machine allows a grading (``Launchers.lanes``)

    def start(self, now: float) -> tuple[int, int]:
        """A learner starts at ``now`` (monotonic): its ticket, and how many lanes it may run at once."""
        with self._lock:
            self._waiting -= 1
            ticket = len(self._started) + len(self._ended)
            lanes = 1
            if self._lanes > 1 and self._waiting == 0 and self._ended:
                enough = self.QUARTER * sum(self._ended) / len(self._ended)
                if all(now - began >= enough for began in self._started.values()):
                    lanes = self._lanes
            self._started[ticket] = now
            return ticket, lanes

    def end(self, ticket: int, now: float) -> None:
        with self._lock:
            self._ended.append(now - self._started.pop(ticket))


class Batch:
    """One ``grader batch`` run; ``run()`` grades what is stale and writes the class files."""

    def __init__(self, course: Course, out_dir: Path, *, device: RequestedDevice = "auto", lang: Lang = "vi",
                 workers: int = 1, force: bool = False, progress: bool = True, fork: bool = True,
                 isolation: Isolation = NONE, wall_clock_s: float | None = None,
                 record: ClassRecord | None = None, launchers: Launchers = FRESH) -> None:
        self.course, self.out_dir = course, out_dir
        self.launchers = launchers
        self.isolation = isolation
        self.wall_clock_s = wall_clock_s
        self.device, self.lang = device, lang
        self.workers, self.force, self.progress, self.fork = workers, force, progress, fork
        self.course_hash = course_sha256(course)
        self.record = record
        self.book = _Book(out_dir, course.exercise_ids, course.max_score, record)
        self.key = b""  # the output folder's seal key, read (or made) when the run starts

    def stamp(self, learner: Learner) -> Stamp:
        """What a batch adds to a report; a re-run compares it to decide what to regrade."""
        return Stamp(submission_sha256(learner.path), self.course_hash, __version__, self.lang, self.device)

    def grade(self, learner: Learner, stamp: Stamp, launcher: Launcher,
              tail: _Tail | None = None) -> tuple[Outcome, Report]:
        """Grade one learner and write their report; never raises, whatever the learner or the
        output folder does: what goes wrong is this learner's grader_error row. ``tail``: the batch's
        learners, which says whether this one runs in lanes (one lane without)."""
        ticket, lanes = tail.start(time.monotonic()) if tail is not None else (0, 1)
        try:
            report = grade(learner.path, self.course, device=self.device, lang=self.lang, launcher=launcher,
                           wall_clock_s=self.wall_clock_s, lanes=lanes)
        except Exception as exc:  # noqa: BLE001 - one learner's grading bug must not stop the class
            report = failed_report(learner.path, self.course, f"{type(exc).__name__}: {exc}", self.lang)
        finally:
            if tail is not None:
                tail.end(ticket, time.monotonic())
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
            # (--force regrades every learner: their reports are not read, 5 ms each, before any grading starts)
            old = None if self.force else load_report(report_path(self.out_dir, learner.id))
            bound = self.wall_clock_s or self.course.limits.run_timeout_s
            if old is not None and is_current(old, stamp, self.key, learner.id, bound):
                book.keep(old.report)
            else:
                todo.append((learner, stamp))
        current = len(learners) - len(todo)
        book.add(None)
        counts = {"graded": 0, "failed": 0}
        bar = tqdm(total=len(learners), initial=current, unit="learner", desc="grading", file=sys.stderr,
                   disable=not self.progress, dynamic_ncols=True)
        # The workers fork their processes from servers that imported torch once, for the batch's lifetime.
        # Lanes fork from the same servers; exec'd (``--no-fork-server``), each lane would import torch again.
        tail = _Tail(len(todo), self.launchers.lanes(self.device, self.isolation) if self.fork else 1)
        with self.launchers.batch(self.fork, machine_share(self.workers, os.environ), self.isolation) as launcher:
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grade")
            try:
                futures = {pool.submit(self.grade, learner, stamp, launcher, tail): learner for learner, stamp in todo}
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
                write_summary(summarize(book.reports.values(), self.course, self.lang, self.record), self.out_dir)
        return BatchResult(len(learners), counts["graded"] + counts["failed"], current, counts["failed"],
                           self.out_dir, self.record)


Sources = dict[str, tuple[tuple[Path, str], ...]]  # learner -> their entries, for a staged folder


def _roster_learners(learners: list[Learner], submissions: Path, out_dir: Path,
                     options: RosterOptions) -> tuple[list[Learner], ClassRecord, Sources]:
    """The batch's learners under their roster ids, and the class list (grader/intake/roster.py)."""
    roster = read_roster(options.path, options.encoding)
    metadata = gradescope_metadata(submissions)
    entries = [learner for learner in learners if not (metadata and learner.path.name == GRADESCOPE_METADATA)]
    claims = [claim(learner.path, metadata) for learner in entries]
    found = match(roster, claims)
    planned = assign(found, claims, out_dir / STAGING_DIR, entries)
    record = record_of(roster, found, options.missing, planned.unmatched_ids)
    return list(planned.learners), record, dict(planned.sources)


def run_batch(submissions: Path, out_dir: Path, course: Course, *, workers: int = 1, force: bool = False,
              device: RequestedDevice = "auto", lang: Lang = "vi", shard: Shard | None = None,
              progress: bool = True, fork: bool = True, isolation: Isolation | None = None,
              wall_clock_s: float | None = None, roster: RosterOptions | None = None,
              launchers: Launchers = FRESH) -> BatchResult:
    """``fork``: fork each run's processes from warm servers (``grader batch --no-fork-server``:
    exec each, a fresh Python every time, slower, same verdicts); ``isolation`` None: what this
    machine offers (grader/run/isolation.py); ``wall_clock_s``: each learner's bound
    (``--learner-timeout``), else the course's ``limits.run_timeout_s``; ``roster``: the class list
    the submissions are matched to; ``launchers``: where the processes come from (grader/run/launch.py)."""
    if workers < 1:
        raise GraderError(f"--workers: {workers!r} must be at least 1")
    if out_dir.resolve() == submissions.resolve():
        raise GraderError(f"-o {out_dir}: write the reports outside the submissions folder")
    # An output folder inside the submissions folder is not a learner.
    learners = discover(submissions, skip=out_dir)
    record: ClassRecord | None = None
    sources: Sources = {}
    if roster is not None:
        learners, record, sources = _roster_learners(learners, submissions, out_dir, roster)
    if shard is not None:
        learners = shard.pick(learners)
    if record is not None:
        # Every shard writes the same class list: the whole class's, whichever learners it grades.
        write_record(record, out_dir)
        for learner in learners:
            if learner.id in sources:
                stage(sources[learner.id], learner.path)
    return Batch(course, out_dir, device=device, lang=lang, workers=workers, force=force, progress=progress,
                 fork=fork, isolation=isolation or probe(), wall_clock_s=wall_clock_s, record=record,
                 launchers=launchers).run(learners)


def sealed_reports(folder: Path, command: str) -> list[tuple[Path, StoredReport]]:
    """Every learner report of a batch output folder, read back typed, each checked against the
    folder's seal: a report changed after the grader wrote it is an error that says to re-run."""
    if not folder.is_dir():
        raise GraderError(f"{command}: not a folder: {folder}")
    key = seal_key(folder, create=False)
    found = []
    for path in sorted(folder.glob("*.yaml")):
        if path.stem in CLASS_FILES:
            continue
        stored = load_report(path)
        if stored is None:
            raise GraderError(f"{command}: {path} is not a grader report")
        if key is None or not seal_intact(stored, key):
            raise GraderError(f"{command}: {path} was changed after the grader wrote it (its seal does not match); "
                              f"re-run the batch that wrote {folder}")
        found.append((path, stored))
    return found


def _same_record(records: Sequence[tuple[Path, ClassRecord | None]]) -> ClassRecord | None:
    """The shards' one class list: all given the same roster and matched alike, or none had one."""
    def comparable(record: ClassRecord | None) -> object:
        return None if record is None else {k: v for k, v in as_dict(record).items() if k != "source"}

    first_path, first = records[0] if records else (Path(), None)
    for path, record in records[1:]:
        if comparable(record) != comparable(first):
            raise GraderError(f"merge: {first_path} and {path} were graded with different rosters (or one without "
                              "one, or from different submissions folders); grade every shard with the same --roster")
    return first


def reports_lang(reports: Sequence[Report], course: Course) -> Lang:
    """The language the reports were written in (a merge's summary speaks it), else the course's."""
    langs = {report.lang for report in reports}
    if len(langs) == 1:
        return langs.pop()
    return course.default_lang


def merge(dirs: Sequence[Path], out_dir: Path, course: Course) -> int:
    """Gather the learner reports of several batch outputs (shards) into one output folder.

    Each report is read back typed and checked against its own folder's seal; the merged folder
    reseals what it keeps with its own key. A report whose seal does not hold is not merged: its
    shard must be re-run (the message says which). Shards graded with a roster carry its class
    list (all the same) into the merged folder."""
    for folder in dirs:
        if not folder.is_dir():
            raise GraderError(f"merge: not a folder: {folder}")
    record = _same_record([(folder, load_record(folder)) for folder in dirs])
    found: dict[str, tuple[Path, StoredReport]] = {}
    for folder in dirs:
        for path, stored in sealed_reports(folder, "merge"):
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
    if record is not None:
        write_record(record, out_dir)
    write_atomic(out_dir / GRADEBOOK, gradebook_csv(reports, course.exercise_ids, course.max_score, record))
    write_summary(summarize(reports, course, reports_lang(reports, course), record), out_dir)
    return len(reports)
