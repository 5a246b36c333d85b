"""What the processes of one grading say to each other: typed messages, plain data only.

Three processes grade a submission (README, "How grading runs"):

    grader ──plan (stdin)──▶ judge ◀──socket──▶ learner process
      ▲                        │
      └──signed channel────────┘

* the **judge** (grader/judge/, trusted) runs pytest and the checks, holds the expected values,
  the comparisons, the canary and the channel's key, and decides every verdict;
* the **learner process** (grader/learner/) imports the learner's code, runs the calls the judge
  asks for on the devices it asks for, and answers with data: numbers, strings, tensors as bytes +
  dtype + shape + device tag, the device events it recorded. The judge rebuilds base
  ``torch.Tensor`` / ``numpy.ndarray`` objects from the bytes (grader/wire/values.py), so a
  learner's tensor subclass that answers "equal" to everything never reaches a comparison;
* the **grader** (grader/run/sandbox.py) starts both, reads the judge's signed messages, watches
  the deadlines, and settles what a run's messages mean (grader/run/blame.py).

Every message is a frozen dataclass below, sent as JSON (grader/wire/codec.py: ``decode`` accepts
only these types, with these fields and these closed sets) in numbered frames
(grader/wire/framing.py); the judge's reports are signed (grader/wire/signed.py). This module
imports nothing but the standard library: every process can load it, the grader's without torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args

T = TypeVar("T")

# -- closed sets ----------------------------------------------------------------------------------
# Device events the learner process records for the checks (grader/learner/sessions.py, standin.py).
EventKind = Literal["matmul", "op", "sync", "clock", "h2d", "d2h", "d2h_async", "empty_cache", "memory_read",
                    "mismatch"]
# What the learner's top level reports, cell by cell (grader/learner/toplevel.py).
TopLevelEventKind = Literal["importing", "imported", "cell_start", "cell_stop", "cell_end", "cell_kept"]
# Why a cell did not run to its end (the report's top_level section explains each).
StopKind = Literal["syntax_error", "no_gpu", "missing_module", "input", "timeout", "exit", "ended_process", "memory",
                   "file_size", "ipython", "error", "budget", "tampered"]
# Why a call did not return: the learner's code raised, the function is missing or a stub, it ran
# past its deadline now, or in an earlier check.
RaisedKind = Literal["learner_raised", "not_attempted", "timed_out", "already_timed_out"]
DeviceKind = Literal["cpu", "cuda", "mps"]
# How much smaller on each side a stand-in session runs a check's problem, on a cost model scaled to
# read the same virtual times (grader/reference/device.py ``CostModel.smaller``): ex2's timings.
Smaller = Literal[1, 4]
# The two processes of a run that the grader starts (grader/run/launch.py).
Role = Literal["judge", "learner"]
# What a grading may be asked to grade on (``--device``, ``grade(device=)``, the learner process's
# argument): the machine's best, or one kind.
RequestedDevice = Literal["auto", "cpu", "cuda", "mps"]
REQUESTED_DEVICES: tuple[RequestedDevice, ...] = get_args(RequestedDevice)
ROLES: tuple[Role, ...] = get_args(Role)
# Where a check ran: a real device, or the stand-in on the CPU (grader/score/results.py CheckMode).
DeviceMode = Literal["cpu", "cuda", "mps", "standin"]
CheckStatus = Literal["passed", "failed", "error", "timeout", "skipped", "not_attempted"]
# How a check ends besides a check's own ``fail("ex3....")`` ids, which each check module declares
# in its MESSAGES (grader/score/texts/__init__.py): the texts are grader/score/texts/<lang>.yaml's.
RuntimeMessage = Literal[
    "not_attempted", "learner_raised", "cuda_api_off_cuda", "generator_off_device", "pin_off_cpu",
    "memory_limit", "file_size_limit",
    "check_timeout", "function_timed_out", "assertion", "grader_internal", "tampered", "learner_broke_protocol",
    "tampered_figure", "learner_side_failed",
    "child_died", "cpu_limit", "process_limit", "run_timeout", "died_on_import", "import_timeout",
    "child_failed", "memory_held",
]
RUNTIME_MESSAGES: tuple[RuntimeMessage, ...] = get_args(RuntimeMessage)
# Why the grader itself could not run the checks: the judge says so (GraderBroken), the grader's
# process finds it (grader/errors.py GraderFailure); each is a text grader_error.<kind>.
GraderFailureKind = Literal["checks_not_loaded", "child_start_failed", "pytest_failed", "nothing_ran", "internal"]
# The objects a check can have built in the learner process (grader/reference/problems.py).
RecipeName = Literal["ex4.problem", "ex5.problem", "loss.cross_entropy", "loss.breaks_once"]
QueryKind = Literal["live_bytes", "fill_capacity", "inspect"]
# Why the judge lost the learner process: it ended; it did not answer a call within the check's time and
# still runs (stuck: the judge gave up on it, and the grader ends it at once, waiting for no exit of its own);
# it sent what is not a message.
LostReason = Literal["ended", "stuck", "broke_protocol"]


def one_of(value: object, choices: tuple[T, ...], what: str) -> T:
    """``value`` as one of a closed set's ``choices`` (a command-line argument, a user's option);
    ValueError naming ``what`` for anything else."""
    for choice in choices:
        if value == choice:
            return choice
    raise ValueError(f"{what}: {value!r} is not one of {', '.join(map(str, choices))}")


def role_of(text: str) -> Role:
    return one_of(text, ROLES, "role")


def requested_device(text: str) -> RequestedDevice:
    return one_of(text, REQUESTED_DEVICES, "device")


# -- what several messages carry --------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """Something the learner's code did on a device, in order, for checks to read."""

    kind: EventKind
    device: str = ""
    host: float = 0.0  # virtual (stand-in) or real seconds when it happened
    live_bytes: int = 0
    dtype: str = ""
    value: float = 0.0  # a clock read: the value the learner's code got (in seconds)
    source: str = ""  # a clock read: which clock ("perf_counter", "time", "cuda.Event", ...)
    drained: bool | None = None  # the device had finished all its work (known on a stand-in only)
    # A stand-in's virtual time at which its queue drains: the judge recomputes ``drained`` from it
    # and checks the timeline holds together (grader/judge/evidence.py).
    busy_until: float | None = None


@dataclass(frozen=True)
class CudaFacts:
    """The real CUDA device, as the learner process found it before any learner code ran."""

    name: str
    capability: tuple[int, int]
    total_memory: int
    count: int


@dataclass(frozen=True)
class CellStop:
    """A cell of the learner's top level that did not run to its end, and why."""

    module: str
    index: int  # which of the module's cells
    label: str
    line: int | None  # the line within the cell where it stopped
    kind: StopKind
    error: str  # one line
    kept: tuple[str, ...] = ()  # what its later definitions still made (functions, classes, constants)


@dataclass(frozen=True)
class Cell:
    """One unit the learner process runs: lines ``start``..``end`` (1-based, inclusive) of a
    Source's text; its label is what the learner sees: "In [8]", "cell 3", "line 12"."""

    label: str
    start: int
    end: int


@dataclass(frozen=True)
class Source:
    """A learner module as the loader made it (grader/intake/submission.py) and the learner
    process runs it, cell by cell (grader/learner/toplevel.py)."""

    module: str  # importable module name, e.g. "ex1_device" or "submission"
    text: str  # the whole file as Python, IPython forms rewritten, one line for one line (grader/wire/ipython.py)
    origin: str  # file name relative to the submission, as the learner knows it
    cells: tuple[Cell, ...] = ()  # what runs, in order; lines outside every cell are comments
    # True for notebooks and exported cells ("In [8], line 2"); False for the statements of a
    # plain .py, where a line number alone says where.
    numbered: bool = False

    def cell_at(self, line: int) -> Cell | None:
        return next((c for c in self.cells if c.start <= line <= c.end), None)

    def where(self, line: int) -> str:
        """A line of the text as the learner finds it: "bai.ipynb, In [8], line 2"."""
        cell = self.cell_at(line) if self.numbered else None
        if cell is None:
            return f"{self.origin}, line {line}"
        return f"{self.origin}, {cell.label}, line {line - cell.start + 1}"

    def cell_text(self, cell: Cell) -> str:
        return "\n".join(self.text.split("\n")[cell.start - 1 : cell.end])


# -- learner process → judge ----------------------------------------------------------------------
@dataclass(frozen=True)
class Hello:
    """First message, sent before any of the learner's code exists in the process: facts the
    judge may trust (which real devices there are, what they can do)."""

    torch: str
    cuda: CudaFacts | None
    mps: bool
    cuda_bf16: bool = False  # a T4 has no fast bfloat16
    mps_bf16: bool = False  # macOS 14 and later
    mps_grad_scaler: bool = False  # torch 2.8 and later (pytorch/pytorch#150255)
    cpu_name: str = ""


@dataclass(frozen=True)
class TopLevelEvent:
    event: TopLevelEventKind
    module: str
    index: int = -1
    label: str = ""
    stop: CellStop | None = None  # cell_stop
    kept: tuple[str, ...] = ()  # cell_kept


@dataclass(frozen=True)
class Ready:
    """The learner's top level has run; calls may come."""


@dataclass(frozen=True)
class DeviceOpened:
    mode: DeviceMode
    label: str  # "cuda (stand-in)", "cuda (NVIDIA H200)"


@dataclass(frozen=True)
class Returned:
    value: Any  # encoded (grader/wire/values.py)
    printed: str = ""  # what the call printed (cut)
    after: tuple[Any, ...] = ()  # each positional tensor argument after the call (encoded), else None
    events: tuple[Event, ...] = ()  # recorded during the call, on the innermost device
    measured: Mapping[str, Any] = field(default_factory=dict)  # an instrument's figures: peak, scaler calls


@dataclass(frozen=True)
class Raised:
    kind: RaisedKind
    name: str  # the learner function
    text: str = ""  # "TypeError: ..." (learner_raised)
    where: str = ""  # "bai.ipynb, In [8], line 2"
    printed: str = ""
    events: tuple[Event, ...] = ()
    handling: str = ""  # learner_raised inside an except block: the exception it was handling, "OutOfMemoryError: ..."
    files_full: bool = False  # learner_raised when its files had reached the size limit (any writer's message)


@dataclass(frozen=True)
class Answer:
    value: Any


@dataclass(frozen=True)
class Closed:
    events: tuple[Event, ...] = ()  # what the device recorded since the last reply


@dataclass(frozen=True)
class Failed:
    """The learner process could not do what the judge asked (a grader bug, or learner code that
    took the device layer apart): the check errs, never with the learner's verdict."""

    error: str


# -- judge → learner process ----------------------------------------------------------------------
START_SEQ = 1  # the number of the Start frame; each later request's is one more
@dataclass(frozen=True)
class Start:
    """Run the top level of these sources, then serve calls. The judge's first request (``START_SEQ``),
    sent before the judge's own imports (grader/judge/__main__.py)."""

    sources: Mapping[str, Source]  # exercise id -> its learner module
    workdir: str
    cell_timeout_s: float
    budget_s: float
    skip: tuple[tuple[str, int], ...] = ()  # cells an earlier learner process could not finish
    timed_out: tuple[str, ...] = ()  # functions ("ex2_timing.time_matmul") that ran past a limit before
    shown: tuple[tuple[str, int], ...] = ()  # cells an earlier learner process ran: their output is in the report
    # The modules whose top level runs, in order (None: every one); the others run only when one imports
    # them (`from ex1_device import pick_device`): a restart's or a lane's (grader/run/lanes.py) own exercises.
    run: tuple[str, ...] | None = None
    # A folder's other modules (``common.py`` beside ``ex2_timing.py``): written into the work dir, where an
    # exercise's ``import common`` finds them as in the learner's own folder (grader/learner/toplevel.py).
    helpers: tuple[Source, ...] = ()


@dataclass(frozen=True)
class OpenDevice:
    """Enter a device session: the CPU, a real accelerator, or a stand-in (the judge decides)."""

    kind: DeviceKind
    standin: bool
    virtual_clock: bool = False
    budget_bytes: int | None = None
    typed_oom: bool = False
    smaller: Smaller = 1  # a stand-in's cost model, for problems this much smaller (``Smaller``)


@dataclass(frozen=True)
class OpenWorld:
    """ex1: make PyTorch report these devices, consistently (grader/learner/worlds.py)."""

    cuda: bool
    mps: bool
    mps_built: bool = False
    cuda_count: int = 1


@dataclass(frozen=True)
class Close:
    """Leave the innermost device session or world."""


@dataclass(frozen=True)
class Reset:
    """A check starts: PyTorch's defaults back (dtype, grad mode, threads, seed, default device),
    the learner's functools caches cleared, whatever the learner's code or an earlier check changed."""


@dataclass(frozen=True)
class Build:
    """Build a recipe's objects in the innermost session (grader/reference/problems.py); the answer
    is a handle the judge passes back as arguments (``{"$ref": [handle, part]}``)."""

    recipe: RecipeName
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Call:
    exercise: str  # "ex3": which learner module
    function: str
    args: tuple[Any, ...] = ()  # encoded
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    deadline_s: float = 30.0  # the learner process interrupts the call past it
    meter: bool = False  # measure the peak of live tensors during the call
    meter_budget: int | None = None  # ... and run out of memory past this many bytes
    watch_amp: bool = False  # count GradScaler calls and deprecated torch.cuda.amp / torch.cpu.amp uses
    count_steps: bool = False  # count optimizer.step() calls, of any torch optimizer


@dataclass(frozen=True)
class Value:
    """A module-level value of the learner's module (SMALL_N_ANSWER)."""

    exercise: str
    name: str


@dataclass(frozen=True)
class Query:
    """A figure of the innermost device: its live bytes, how many chunks of ``arg`` bytes fit under
    its budget, or (``inspect``) the state of the built object ``handle``."""

    what: QueryKind
    arg: int = 0
    handle: tuple[int, int] = (0, 0)


# -- grader → the learner process's start-up (exec'd or forked) ----------------------------------
MiB = 1024 * 1024  # the unit of the limits' sizes, and of every size a check or a report states


@dataclass(frozen=True)
class Limits:
    """The course's limits on the learner process (course.yaml ``limits``), which it applies to
    itself before any learner code runs (grader/spawn/confine.py)."""

    run_timeout_s: float = 240.0
    memory_mb: int = 6144
    cpu_seconds: int = 600
    max_processes: int = 256
    file_size_mb: int = 256
    output_kb: int = 256
    # The learner's top level (grader/learner/toplevel.py): each cell, and all of it together.
    cell_timeout_s: float = 10.0
    top_level_timeout_s: float = 60.0
    # What the grader's own processes take from a submission (issue 23): a file past submission_mb
    # is not read (grader/intake/submission.py); the judge, which rebuilds the learner process's
    # answers, may hold judge_memory_mb (grader/run/sandbox.py).
    submission_mb: int = 64
    judge_memory_mb: int = 2048


# -- grader ↔ a fork server (grader/run/launch.py ForkServer, grader/spawn/forkserver.py) ------------
@dataclass(frozen=True)
class ServerReady:
    """The server imported what its role needs; ``ok`` False when an import touched CUDA (a forked
    child could not use it): the grader execs that role's processes instead."""

    ok: bool




@dataclass(frozen=True)
class ForkRequest:
    """Fork a child of the server's role: what an exec'd one would get (grader/run/launch.py ``Spawn``).
    The fds come beside the message: stdin, stdout, the role's own, then the ``cgroups`` fds of
    the run's cgroup.procs files (its pids cgroup, its memory cgroup)."""

    env: Mapping[str, str]
    cwd: str
    device: RequestedDevice = "auto"  # the learner process's
    limits: Limits | None = None  # the learner process's; the judge runs without
    cgroups: int = 0
    gpu_share: float = 1.0  # the learner process's part of the GPU's memory


@dataclass(frozen=True)
class ForkStarted:
    pid: int  # in the server's pid namespace (an isolated server's own)


@dataclass(frozen=True)
class ForkExited:
    pid: int  # as ForkStarted gave it: a server forks the children of many runs at once
    code: int  # as os.waitstatus_to_exitcode gives it


# -- grader → judge (its stdin) -------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedCheck:
    id: str
    nodeid: str  # "ex3_roundtrip/test_roundtrip_values.py::test_roundtrip_values"
    timeout_s: float


@dataclass(frozen=True)
class Plan:
    checks: tuple[PlannedCheck, ...]
    start: Start
    device: RequestedDevice
    channel_fd: int
    learner_fd: int
    key: str  # the channel's key (hex); the learner process never sees it
    seed: int = 0  # the grading's secret: the checks draw their problems from it (grader/reference/draws.py)
    refusals_fd: int = -1  # the run's pids.events, read-only: the judge counts refused forks check by check


# -- judge → grader (the signed channel) ----------------------------------------------------------
@dataclass(frozen=True)
class DeviceFound:
    type: DeviceKind
    name: str
    torch: str
    standin: bool


@dataclass(frozen=True)
class GraderBroken:
    """The grader cannot run the checks here (a package missing, a check that does not import).
    Sent only before any learner code ran, so a learner cannot pass its failure off as this."""

    kind: GraderFailureKind
    error: str


@dataclass(frozen=True)
class CheckStarted:
    check: str
    refused: int = -1  # forks the run's cgroup had refused as the judge began it (-1: none it can read)


@dataclass(frozen=True)
class Calling:
    function: str  # "ex2_timing.time_matmul": the learner function the running check calls now


@dataclass(frozen=True)
class CheckEnded:
    check: str
    status: CheckStatus
    message: str = ""  # a RuntimeMessage or one of the check's own ids
    params: Mapping[str, str] = field(default_factory=dict)
    mode: DeviceMode = "cpu"
    devices: tuple[str, ...] = ()
    duration_s: float = 0.0
    refused: int = -1  # forks the run's cgroup had refused as the judge ended it (-1: none it can read)


@dataclass(frozen=True)
class FunctionTimedOut:
    function: str  # later checks that need it are charged at once, in this process and the next


@dataclass(frozen=True)
class Canary:
    status: CheckStatus


@dataclass(frozen=True)
class LearnerLost:
    """The learner process ended, stopped answering or broke the protocol; the judge ends too,
    and the grader settles the check that was running (grader/run/blame.py)."""

    reason: LostReason
    detail: str = ""


@dataclass(frozen=True)
class Done:
    pytest_exit: int


LearnerMessage = Hello | TopLevelEvent | Ready | DeviceOpened | Returned | Raised | Answer | Closed | Failed
JudgeRequest = Start | OpenDevice | OpenWorld | Close | Reset | Build | Call | Value | Query
ServerMessage = ServerReady | ForkStarted | ForkExited
JudgeReport = (DeviceFound | GraderBroken | TopLevelEvent | CheckStarted | Calling | CheckEnded | FunctionTimedOut
               | Canary | LearnerLost | Done)
MESSAGE_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    Event, CudaFacts, CellStop, Cell, Source,
    Hello, TopLevelEvent, Ready, DeviceOpened, Returned, Raised, Answer, Closed, Failed,
    Start, OpenDevice, OpenWorld, Close, Reset, Build, Call, Value, Query,
    PlannedCheck, Plan, Limits, ServerReady, ForkRequest, ForkStarted, ForkExited,
    DeviceFound, GraderBroken, CheckStarted, Calling, CheckEnded, FunctionTimedOut, Canary, LearnerLost, Done,
)}
