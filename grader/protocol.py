"""What the processes of one grading say to each other: typed messages, plain data only.

Three processes grade a submission (README, "How grading runs"):

    grader ──plan (stdin)──▶ judge ◀──socket──▶ learner process
      ▲                        │
      └──signed channel────────┘

* the **judge** (grader/judge.py, trusted) runs pytest and the checks, holds the expected values,
  the comparisons, the canary and the channel's key, and decides every verdict;
* the **learner process** (grader/learner/) imports the learner's code, runs the calls the judge
  asks for on the devices it asks for, and answers with data: numbers, strings, tensors as bytes +
  dtype + shape + device tag, the device events it recorded. The judge rebuilds base
  ``torch.Tensor`` / ``numpy.ndarray`` objects from the bytes (grader/learner/values.py), so a
  learner's tensor subclass that answers "equal" to everything never reaches a comparison;
* the **grader** (grader/sandbox.py) starts both, reads the judge's signed messages, watches the
  deadlines, and settles what a run's messages mean (grader/blame.py).

Every message is a frozen dataclass below, sent as JSON; ``decode`` accepts only these types,
with these fields and these closed sets (``Literal``), and raises ``ProtocolError`` for anything
else — which the judge charges to the learner's process, never to a verdict. This module imports
nothing but the standard library: every process can load it, the grader's without torch.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import select
import struct
import sys
import time
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

MAX_FRAME = 64 * 1024 * 1024  # no check sends or expects more; a learner flooding the socket is cut off
MAX_TEXT = 2000  # learner-controlled text (errors, printed output) in one message, cut beyond

# -- closed sets ----------------------------------------------------------------------------------
# Device events the learner process records for the checks (grader/learner/devices.py, standin.py).
EventKind = Literal["matmul", "op", "sync", "clock", "h2d", "d2h", "d2h_async", "empty_cache", "memory_read",
                    "mismatch"]
# What the learner's top level reports, cell by cell (grader/learner/toplevel.py).
TopLevelEventKind = Literal["importing", "imported", "cell_start", "cell_stop", "cell_end", "cell_kept"]
# Why a cell did not run to its end (the report's top_level section explains each).
StopKind = Literal["syntax_error", "no_gpu", "missing_module", "input", "timeout", "exit", "ended_process", "memory",
                   "ipython", "error", "budget"]
# Why a call did not return: the learner's code raised, the function is missing or a stub, it ran
# past its deadline now, or in an earlier check.
RaisedKind = Literal["learner_raised", "not_attempted", "timed_out", "already_timed_out"]
DeviceKind = Literal["cpu", "cuda", "mps"]
# Where a check ran: a real device, or the stand-in on the CPU (grader/results.py CheckMode).
DeviceMode = Literal["cpu", "cuda", "mps", "standin"]
CheckStatus = Literal["passed", "failed", "error", "timeout", "skipped", "not_attempted"]
# How a check ends besides a check's own ``fail("ex3....")`` ids, which each check module declares
# in its MESSAGES (grader/messages/__init__.py): the texts are grader/messages/<lang>.yaml's.
RuntimeMessage = Literal[
    "not_attempted", "learner_raised", "cuda_api_off_cuda", "memory_limit", "file_size_limit",
    "check_timeout", "function_timed_out", "assertion", "grader_internal", "tampered", "learner_broke_protocol",
    "child_died", "cpu_limit", "process_limit", "run_timeout", "died_on_import", "import_timeout",
    "child_failed",
]
RUNTIME_MESSAGES: tuple[RuntimeMessage, ...] = get_args(RuntimeMessage)
# Why the grader itself could not run the checks (grader/errors.py GraderFailureKind).
BrokenKind = Literal["checks_not_loaded", "child_start_failed", "pytest_failed", "nothing_ran", "internal"]
QueryKind = Literal["live_bytes", "fill_capacity", "inspect"]


class ProtocolError(Exception):
    """A frame that is not one of the messages below: the sending process broke the protocol."""


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
    label: str
    start: int
    end: int


@dataclass(frozen=True)
class Source:
    """A learner module as the learner process runs it (grader/submission.py SourceFile)."""

    module: str
    text: str
    origin: str
    cells: tuple[Cell, ...]
    numbered: bool


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
    value: Any  # encoded (grader/learner/values.py)
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
@dataclass(frozen=True)
class Start:
    """Run the top level of these sources, then serve calls."""

    sources: Mapping[str, Source]  # exercise id -> its learner module
    workdir: str
    cell_timeout_s: float
    budget_s: float
    skip: tuple[tuple[str, int], ...] = ()  # cells an earlier learner process could not finish
    timed_out: tuple[str, ...] = ()  # functions ("ex2_timing.time_matmul") that ran past a limit before


@dataclass(frozen=True)
class OpenDevice:
    """Enter a device session: the CPU, a real accelerator, or a stand-in (the judge decides)."""

    kind: DeviceKind
    standin: bool
    virtual_clock: bool = False
    budget_bytes: int | None = None
    typed_oom: bool = False


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
    """Build a recipe's objects in the innermost session (grader/learner/recipes.py); the answer
    is a handle the judge passes back as arguments (``{"$ref": [handle, part]}``)."""

    recipe: str
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
    device: str  # --device: "auto" | "cpu" | "cuda" | "mps"
    channel_fd: int
    learner_fd: int
    key: str  # the channel's key (hex); the learner process never sees it


# -- judge → grader (the signed channel) ----------------------------------------------------------
@dataclass(frozen=True)
class DeviceFound:
    type: str
    name: str
    torch: str
    standin: bool


@dataclass(frozen=True)
class GraderBroken:
    """The grader cannot run the checks here (a package missing, a check that does not import).
    Sent only before any learner code ran, so a learner cannot pass its failure off as this."""

    kind: BrokenKind
    error: str


@dataclass(frozen=True)
class CheckStarted:
    check: str


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


@dataclass(frozen=True)
class FunctionTimedOut:
    function: str  # later checks that need it are charged at once, in this process and the next


@dataclass(frozen=True)
class Canary:
    status: CheckStatus


@dataclass(frozen=True)
class LearnerLost:
    """The learner process ended, stopped answering or broke the protocol; the judge ends too,
    and the grader settles the check that was running (grader/blame.py)."""

    reason: Literal["ended", "broke_protocol"]
    detail: str = ""


@dataclass(frozen=True)
class Done:
    pytest_exit: int


LearnerMessage = Hello | TopLevelEvent | Ready | DeviceOpened | Returned | Raised | Answer | Closed | Failed
JudgeRequest = Start | OpenDevice | OpenWorld | Close | Reset | Build | Call | Value | Query
JudgeReport = (DeviceFound | GraderBroken | TopLevelEvent | CheckStarted | Calling | CheckEnded | FunctionTimedOut
               | Canary | LearnerLost | Done)
_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    Event, CudaFacts, CellStop, Cell, Source,
    Hello, TopLevelEvent, Ready, DeviceOpened, Returned, Raised, Answer, Closed, Failed,
    Start, OpenDevice, OpenWorld, Close, Reset, Build, Call, Value, Query,
    PlannedCheck, Plan,
    DeviceFound, GraderBroken, CheckStarted, Calling, CheckEnded, FunctionTimedOut, Canary, LearnerLost, Done,
)}


# -- small helpers every side uses ----------------------------------------------------------------
def cut(text: str, limit: int = MAX_TEXT) -> str:
    """Learner-controlled text, capped; the cut says so."""
    return text if len(text) <= limit else text[:limit] + f" […{len(text) - limit} more characters cut]"


def bytes_field(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def bytes_of(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _float(value: float) -> Any:
    return value if math.isfinite(value) else {"$float": repr(value)}


def encode_plain(value: Any, depth: int = 0) -> Any:
    """Numbers, strings, None, bools, tuples, lists and str-keyed dicts, tagged so that they come
    back as they were (a tuple stays a tuple). Anything else is the caller's to encode."""
    if depth > 20:
        raise ProtocolError("value nested too deeply")
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, tuple):
        return {"$tuple": [encode_plain(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[encode_plain(k, depth + 1), encode_plain(v, depth + 1)] for k, v in value.items()]}
    raise ProtocolError(f"cannot send a {type(value).__name__}")


# -- the codec ---------------------------------------------------------------------------------
def to_json(message: Any) -> Any:
    """A message (or a value inside one) as JSON data: dataclasses tagged with their type."""
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        if type(message).__name__ not in _TYPES:
            raise ProtocolError(f"not a message: {type(message).__name__}")
        return {"$msg": type(message).__name__, **{f.name: to_json(getattr(message, f.name))
                                                   for f in dataclasses.fields(message)}}
    if isinstance(message, (tuple, list)):
        return [to_json(v) for v in message]
    if isinstance(message, Mapping):
        return {str(k): to_json(v) for k, v in message.items()}
    if isinstance(message, float):
        return _float(message)
    return message


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, vars(sys.modules[__name__]))
    return _HINTS[cls]


def _conform(value: Any, hint: Any, where: str) -> Any:
    """``value`` (decoded JSON) as the annotation ``hint`` wants it, or ProtocolError."""
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin is Literal:
        if value not in get_args(hint):
            raise ProtocolError(f"{where}: {value!r} is not one of {get_args(hint)}")
        return value
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _conform(value, option, where)
            except ProtocolError as exc:
                errors.append(str(exc))
        raise ProtocolError("; ".join(errors) or f"{where}: unexpected None")
    if origin is tuple:
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list")
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_conform(v, args[0], where) for v in value)
        if len(args) != len(value):
            raise ProtocolError(f"{where}: expected {len(args)} items")
        return tuple(_conform(v, a, where) for v, a in zip(value, args, strict=True))
    if origin is Mapping or hint is Mapping:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object")
        inner = get_args(hint)[1] if get_args(hint) else Any
        return {str(k): _conform(v, inner, where) for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not (isinstance(value, dict) and value.get("$msg") == hint.__name__):
            raise ProtocolError(f"{where}: expected a {hint.__name__}")
        return _build(hint, value)
    if hint is float:
        if isinstance(value, dict) and set(value) == {"$float"}:
            return float(value["$float"])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"{where}: expected a number")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(f"{where}: expected an integer")
        return value
    if hint in (str, bool):
        if type(value) is not hint:
            raise ProtocolError(f"{where}: expected a {hint.__name__}")
        return value
    raise ProtocolError(f"{where}: cannot read a {hint!r}")  # pragma: no cover - a field type this codec lacks


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names - {"$msg"}
    if unknown:
        raise ProtocolError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    hints = _hints(cls)
    values = {name: _conform(data[name], hints[name], f"{cls.__name__}.{name}") for name in names if name in data}
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProtocolError(f"{cls.__name__}: {exc}") from None


def from_json(data: Any, expected: Any = None) -> Any:
    """A message from JSON data; ``expected`` (a type or a Union of them) narrows what is accepted."""
    if not isinstance(data, dict) or data.get("$msg") not in _TYPES:
        raise ProtocolError("not a message")
    cls = _TYPES[data["$msg"]]
    if expected is None:
        allowed = None
    else:
        allowed = get_args(expected) if get_origin(expected) in (Union, types.UnionType) else (expected,)
    if allowed is not None and cls not in allowed:
        raise ProtocolError(f"a {cls.__name__} where {', '.join(a.__name__ for a in allowed)} was expected")
    return _build(cls, data)


def encode(message: Any) -> bytes:
    return json.dumps(to_json(message), ensure_ascii=True, separators=(",", ":")).encode()


def decode(payload: bytes, expected: Any = None) -> Any:
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        raise ProtocolError("a frame that is not JSON") from None
    return from_json(data, expected)


class Connection:
    """One end of the judge ↔ learner socket: whole frames in and out, each numbered.

    A frame is its length, a sequence number and one message. The judge numbers each request;
    every answer — and the top-level events a ``Start`` brings — carries its request's number,
    so an answer to anything but the request in flight (bytes a learner's code wrote into the
    socket, a stale answer after them) is a protocol error, never misread as the answer.
    """

    HEADER = struct.Struct(">II")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    def send(self, message: Any, seq: int = 0) -> None:
        payload = encode(message)
        if len(payload) > MAX_FRAME:
            raise ProtocolError(f"a message of {len(payload)} bytes is over the {MAX_FRAME} limit")
        view = memoryview(self.HEADER.pack(len(payload), seq) + payload)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]

    def _read(self, count: int, deadline: float | None) -> bytes:
        while len(self._buffer) < count:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    raise TimeoutError("no answer in time")
            chunk = os.read(self.fd, max(65536, count - len(self._buffer)))
            if not chunk:
                raise EOFError("the other side closed the connection")
            self._buffer += chunk
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def receive_numbered(self, expected: Any = None, deadline: float | None = None) -> tuple[int, Any]:
        """The next frame's number and message; EOFError when the other side is gone, TimeoutError
        past ``deadline`` (time.monotonic()), ProtocolError for anything but a message of the
        ``expected`` types."""
        length, seq = self.HEADER.unpack(self._read(self.HEADER.size, deadline))
        if length > MAX_FRAME:
            raise ProtocolError(f"a frame of {length} bytes is over the {MAX_FRAME} limit")
        return seq, decode(self._read(length, deadline), expected)

    def receive(self, expected: Any = None, deadline: float | None = None, seq: int | None = None) -> Any:
        """The next message; with ``seq``, it must answer that request."""
        got, message = self.receive_numbered(expected, deadline)
        if seq is not None and got != seq:
            raise ProtocolError(f"an answer numbered {got} while request {seq} is in flight")
        return message

    def close(self) -> None:
        os.close(self.fd)
