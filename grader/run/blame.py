"""What one run's messages mean: which check a crash is charged to, which cell is skipped next.

A run is one judge + learner process pair (grader/run/sandbox.py). Its judge's messages, in order,
fold into a ``Trace`` (``Trace.add``); when the pair has ended, ``settle`` turns the trace and how
the run ended (``RunEnd``) into outcomes, stopped cells, what the next run must skip, and notes.
Both are pure: no processes, no clocks, no I/O — tests/test_blame.py runs them on made-up runs.

The rules, in order:
1. Nothing of the learner's ran and no check ended: the grader's own failure (a package missing,
   a check that does not import, a learner process that did not start), never the learner's.
2. A line on the channel without the key, or a learner process that broke the protocol (wrote
   into the judge's socket): the report says "tampering". A forged line is never read as a
   message, so the verdicts stand — except the check whose answer came in broken. A canary that
   did not fail means the judge's own pytest misbehaved: every result of the run is void.
3. The learner process ended inside a top-level cell: that cell is recorded and skipped by the
   next run, which runs the rest; no check is charged.
4. It ended while a module was importing: every check of the exercises in that file.
5. It ended (or was stopped) during a check: that check — a timeout, the CPU or process limit,
   or the exit it made. The function it was calling is remembered as timed out.
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from grader.errors import GraderFailure
from grader.score.results import CheckOutcome, DeviceInfo
from grader.wire.codec import cut
from grader.wire.messages import (
    Calling,
    Canary,
    CellStop,
    CheckEnded,
    CheckStarted,
    CheckStatus,
    DeviceFound,
    Done,
    FunctionTimedOut,
    GraderBroken,
    LearnerLost,
    StopKind,
    TopLevelEvent,
)

# Why the grader stopped a run (grader/run/sandbox.py): a deadline or the process limit.
KillReason = Literal["check_timeout", "cell_timeout", "run_timeout", "process_limit"]


@dataclass
class Trace:
    """What a run's judge said so far, folded message by message."""

    device: DeviceInfo | None = None
    broken: GraderBroken | None = None
    learner_started: bool = False  # a learner module began running: from here on, nothing is the grader's alone
    current: str | None = None  # the check running now
    calling: str | None = None  # the learner function it called last
    importing: str | None = None  # the learner module importing now
    cells: list[tuple[str, int, str]] = field(default_factory=list)  # running cells, innermost last
    results: dict[str, CheckEnded] = field(default_factory=dict)
    timed_out: set[str] = field(default_factory=set)
    stops: dict[tuple[str, int], CellStop] = field(default_factory=dict)
    kept: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)
    canary: CheckStatus | None = None
    lost: LearnerLost | None = None
    done: bool = False

    def add(self, message: Any) -> None:
        if isinstance(message, CheckStarted):
            self.current, self.calling = message.check, None
        elif isinstance(message, CheckEnded):
            self.results[message.check] = message
            if message.status == "timeout" and self.calling and message.message == "check_timeout":
                self.timed_out.add(self.calling)
            self.current = None
        elif isinstance(message, Calling):
            self.calling = message.function[:120]
        elif isinstance(message, FunctionTimedOut):
            self.timed_out.add(message.function[:120])
        elif isinstance(message, TopLevelEvent):
            self._top_level(message)
        elif isinstance(message, GraderBroken) and not self.learner_started:
            self.broken = message
        elif isinstance(message, DeviceFound) and self.device is None:
            self.device = DeviceInfo(message.type, message.name[:100], message.torch[:40], message.standin)
        elif isinstance(message, Canary):
            self.canary = message.status
        elif isinstance(message, LearnerLost):
            self.lost = message
        elif isinstance(message, Done):
            self.done = True

    def _top_level(self, message: TopLevelEvent) -> None:
        self.learner_started = True
        key = (message.module, message.index)
        if message.event == "importing":
            self.importing = message.module
        elif message.event == "imported":
            self.importing = None
        elif message.event == "cell_start":
            self.cells.append((message.module, message.index, message.label[:40]))
        elif message.event == "cell_end" and self.cells:
            self.cells.pop()
        elif message.event == "cell_stop" and message.stop is not None:
            self.stops.setdefault(key, _capped(message.stop))
        elif message.event == "cell_kept":
            self.kept.setdefault(key, tuple(name[:60] for name in message.kept[:50]))


def _capped(stop: CellStop) -> CellStop:
    return dataclasses.replace(stop, label=stop.label[:40], error=cut(stop.error, 300),
                               kept=tuple(name[:60] for name in stop.kept[:50]))


@dataclass(frozen=True)
class RunEnd:
    """How a run's processes ended."""

    killed_for: KillReason | None
    learner_exit: int | None  # its exit status (negative: the signal), None if unknown
    forged: int = 0  # channel lines without the key
    judge_output: str = ""  # what the judge printed: the grader's own output, for a grader failure
    memory_killed: bool = False  # the kernel stopped a process of the run past limits.memory_mb (its cgroup)


@dataclass(frozen=True)
class Context:
    """What the run was asked to do."""

    pending: tuple[str, ...]  # the checks this run was to grade
    exercise_of: Mapping[str, str]  # check id -> exercise id
    module_of: Mapping[str, tuple[str, str]]  # exercise id -> (learner module, file as the learner knows it)
    cell_timeout_s: float
    max_processes: int
    cpu_seconds: int
    first_run: bool  # no earlier run: what the judge printed is the grader's alone
    run_timeout_s: float = 240.0  # the learner's wall-clock bound (limits.run_timeout_s or --learner-timeout)
    memory_mb: int = 6144  # limits.memory_mb


@dataclass(frozen=True)
class Settled:
    outcomes: dict[str, CheckOutcome]
    stops: tuple[CellStop, ...] = ()  # cells that stopped in this run
    kept: Mapping[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)  # what skipped cells still defined
    skip: tuple[tuple[str, int], ...] = ()  # cells the next run must not run again
    timed_out: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()
    grader_error: GraderFailure | None = None
    device: DeviceInfo | None = None


def describe_exit(code: int | None) -> str:
    if code is None:  # it had not ended within LEARNER_EXIT_WAIT_S of hanging up (grader/run/sandbox.py)
        return "exit status unknown"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def outcome_of(message: CheckEnded) -> CheckOutcome:
    return CheckOutcome(message.check, message.status, message.message[:80],
                        {str(k)[:40]: cut(str(v), 500) for k, v in list(message.params.items())[:20]},
                        message.mode, message.duration_s, tuple(d[:60] for d in message.devices[:8]))


def grader_failure(trace: Trace, end: RunEnd, ctx: Context) -> GraderFailure | None:
    """Why this run could not run any check, when the cause is the grader's, not the learner's."""
    if trace.learner_started or trace.results:
        return None
    if end.killed_for == "run_timeout" and not ctx.first_run:  # the learner's time ran out between two runs
        return None
    broken = trace.broken
    failure = (GraderFailure(broken.kind, broken.error[:200]) if broken is not None
               else GraderFailure("nothing_ran" if trace.done else "child_start_failed", ""))
    if not failure.error or failure.kind == "pytest_failed":
        from grader.errors import error_line

        printed = error_line(end.judge_output) if ctx.first_run else ""
        text = ": ".join(part for part in (failure.error, printed) if part)
        failure = dataclasses.replace(failure, error=text or f"it ended ({describe_exit(end.learner_exit)})")
    return failure


def settle(trace: Trace, end: RunEnd, ctx: Context) -> Settled:
    """The outcomes of one run (see the module's rules)."""
    failure = grader_failure(trace, end, ctx)
    if failure is not None:
        return Settled({}, grader_error=failure, device=trace.device)
    outcomes = {check: outcome_of(message) for check, message in trace.results.items() if check in ctx.pending}
    stops = dict(trace.stops)
    skip: list[tuple[str, int]] = []
    timed_out = set(trace.timed_out)
    notes: list[str] = []
    broke = trace.lost is not None and trace.lost.reason == "broke_protocol"
    figures = any(outcome.message_id == "tampered_figure" for outcome in outcomes.values())
    if end.forged or broke or figures or (trace.done and trace.canary != "failed"):
        notes.append("tampering")
    if trace.done and trace.canary != "failed":  # the judge's own pytest did not run as it should
        outcomes = {check: CheckOutcome(check, "failed", "tampered") for check in outcomes}
    if broke and trace.current is not None:  # what the check was answered with cannot be trusted
        outcomes[trace.current] = CheckOutcome(trace.current, "failed", "learner_broke_protocol")
    left = [c for c in ctx.pending if c not in outcomes]

    def settled() -> Settled:
        return Settled(outcomes, tuple(stops.values()), dict(trace.kept), tuple(skip), frozenset(timed_out),
                       tuple(notes), device=trace.device)

    clean = trace.done and end.killed_for is None
    if trace.cells and not trace.done and end.killed_for in (None, "cell_timeout", "process_limit"):
        module, index, label = trace.cells[-1]
        kind: StopKind
        if end.killed_for == "cell_timeout":
            kind, error = "timeout", f"the cell ran past its {ctx.cell_timeout_s:g} s limit"
        elif end.killed_for == "process_limit":
            kind, error = "ended_process", f"it started more than {ctx.max_processes} processes"
        elif end.memory_killed:
            kind, error = "memory", f"it held more than {ctx.memory_mb} MiB, shared memory included"
        elif broke:
            kind, error = "tampered", "it wrote into the connection between the judge and the learner's code"
        else:
            kind, error = "ended_process", describe_exit(end.learner_exit)
        stops.setdefault((module, index), CellStop(module, index, label, None, kind, error))
        skip.append((module, index))
        return settled()
    if not left or clean:
        return settled()
    code = describe_exit(end.learner_exit)
    if trace.importing is not None:
        timed = end.killed_for in ("check_timeout", "run_timeout")
        for check in left:
            module, origin = ctx.module_of.get(ctx.exercise_of.get(check, ""), ("", ""))
            if module == trace.importing:
                outcomes[check] = CheckOutcome(check, "timeout" if timed else "error",
                                               "import_timeout" if timed else "died_on_import",
                                               {"code": code, "origin": origin})
    elif trace.current is not None and trace.current in left:
        if end.killed_for == "check_timeout" and trace.calling:
            timed_out.add(trace.calling)
        status: CheckStatus = "timeout" if end.killed_for in ("check_timeout", "run_timeout") else "error"
        # SIGXCPU: the kernel's answer to RLIMIT_CPU (limits.cpu_seconds).
        message = end.killed_for or ("memory_held" if end.memory_killed
                                     else "cpu_limit" if code == "signal SIGXCPU" else "child_died")
        params = {"code": code, "limit": str(ctx.max_processes), "limit_s": str(ctx.cpu_seconds),
                  "wall_s": f"{ctx.run_timeout_s:g}", "limit_mb": str(ctx.memory_mb)}
        outcomes[trace.current] = CheckOutcome(trace.current, status, message, params)
    if end.killed_for == "run_timeout":
        wall = {"wall_s": f"{ctx.run_timeout_s:g}"}
        for check in ctx.pending:
            outcomes.setdefault(check, CheckOutcome(check, "timeout", "run_timeout", wall))
    return settled()
