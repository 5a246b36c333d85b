"""What grading produces: check, exercise and report results (frozen, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from grader.course import Lang, Visibility
from grader.wire.messages import CheckStatus, DeviceKind, DeviceMode, StopKind

ExerciseStatus = Literal["passed", "partial", "failed", "not_attempted", "error", "timeout"]
# Where a check actually ran: a real device, or the CPU stand-in for an accelerator; ``static``
# when nothing ran (a file missing, a notebook that does not load, a grader that could not run).
CheckMode = Literal[DeviceMode, "static"]
# What a report says it graded on: the device the judge found, or ``unknown`` when nothing ran.
GradedDevice = Literal[DeviceKind, "unknown"]
# How the learner's code was isolated (grader/run/isolation.py).
IsolationMode = Literal["bwrap", "none"]


@dataclass(frozen=True)
class CheckOutcome:
    """How one check ended, before scoring: what the judge said (grader/run/blame.py), or what the
    grader found without running anything (a file missing, a notebook that does not load)."""

    id: str
    status: CheckStatus
    message_id: str = ""  # a protocol RuntimeMessage, a check's own id, or load_* / absent / not_graded
    params: Mapping[str, str] = field(default_factory=dict)
    mode: CheckMode | None = None
    duration_s: float = 0.0
    devices: tuple[str, ...] = ()  # where it ran: "cpu", "cuda (stand-in)", "mps (stand-in)", ...


@dataclass(frozen=True)
class CheckResult:
    id: str
    status: CheckStatus
    points: float
    max_points: float
    message: str = ""
    hint: str = ""
    mode: CheckMode | None = None
    visibility: Visibility = "public"
    duration_s: float = 0.0
    devices: tuple[str, ...] = ()  # each device it ran on: "cpu", "cuda (stand-in)", "mps (stand-in)"


@dataclass(frozen=True)
class ExerciseResult:
    id: str
    title: str
    status: ExerciseStatus
    score: float
    max_score: float
    checks: tuple[CheckResult, ...]


@dataclass(frozen=True)
class DeviceInfo:
    type: GradedDevice
    name: str
    torch: str
    standin: bool = False
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class TopLevelStop:
    """A cell of the learner's top level that did not run to its end; it costs no points."""

    where: str  # "bai14.ipynb, In [8], line 1"
    kind: StopKind
    error: str  # one line
    message: str  # what happened and what to do, in the report's language
    kept: tuple[str, ...] = ()  # definitions the cell still made after it stopped


@dataclass(frozen=True)
class IsolationInfo:
    """How the learner's code was kept from the grader, other learners and the network
    (grader/run/isolation.py): ``bwrap``, or ``none`` with what this machine lacks."""

    mode: IsolationMode = "none"
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    learner: str
    submission: str
    score: float
    max_score: float
    device: DeviceInfo
    exercises: tuple[ExerciseResult, ...]
    lang: Lang
    grading_seconds: float
    grader_version: str
    notes: tuple[str, ...] = ()
    output: str = ""  # what the learner's code printed while graded, cut at limits.output_kb
    # Set when the grader itself could not run the checks (its install, its code): one line
    # naming the cause; every check is then skipped and the score says nothing about the learner.
    grader_error: str = ""
    top_level: tuple[TopLevelStop, ...] = ()  # in the order the cells come in the submission
    isolation: IsolationInfo = IsolationInfo()
    submitted_as: str = ""  # the learner's file or folder name as they gave it, shown (grader/intake/names.py)
    # The part of grading_seconds the wall-clock bound counts (--learner-timeout): from the learner's
    # processes being up to the end; the grader's own start-up, which a busy machine stretches, is not.
    learner_seconds: float = 0.0
    # The grading's secret (grader/reference/draws.py): its problems were drawn from it, and
    # ``grader grade --seed`` with it regrades identically. 0: no check ran (nothing was drawn).
    seed: int = 0
