"""The learner process's loop: run the learner's top level, then answer the judge's requests.

Requests come one at a time over the socket (grader/wire/messages.py) and each gets one answer.
Sessions nest: ``OpenDevice`` / ``OpenWorld`` enter one, ``Close`` leaves the innermost, and
calls run inside the innermost. Everything that goes back is plain data: what a call returned
(grader/wire/values.py), what it printed, the device's events since the last answer, and an
instrument's figures. Nothing here compares or decides: the judge does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import torch

from grader.emulation.patching import NO_LEARNER_CODE, LearnerCode, preloaded_modules
from grader.learner import torchstate
from grader.learner.calls import Outcome, call, clear_learner_caches, lookup
from grader.learner.instruments import counted_steps, metered, watch_amp
from grader.learner.onmachine import asked_again
from grader.learner.sessions import Session, open_session, place
from grader.learner.toplevel import TimeUp, TopLevel, TopLevelLimits, place_helpers
from grader.learner.worlds import world
from grader.reference import problems
from grader.wire.codec import ProtocolError, cut
from grader.wire.framing import Connection
from grader.wire.messages import (
    Answer,
    Build,
    Call,
    Close,
    Closed,
    DeviceOpened,
    Failed,
    JudgeRequest,
    OpenDevice,
    OpenWorld,
    Query,
    Raised,
    Ready,
    Reset,
    Returned,
    Source,
    Start,
    TopLevelEvent,
    Value,
)
from grader.wire.values import Where, decode_value, encode_tensor, encode_value, real_device

_NUM_THREADS = torch.get_num_threads()


class _Tee(io.TextIOBase):
    """stdout during a call: to the grader's output pipe as always, and kept for the judge."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.kept = io.StringIO()

    def write(self, text: str) -> int:
        if self.kept.tell() < 64 * 1024:
            self.kept.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


@contextlib.contextmanager
def _printed() -> Iterator[_Tee]:
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    try:
        yield tee
    finally:
        if sys.stdout is tee:
            sys.stdout = tee.out


@dataclass
class _Level:
    """One open session (a device, or ex1's simulated machine)."""

    context: contextlib.ExitStack
    session: Session | None = None
    sent: int = 0  # events already sent
    built: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    def new_events(self) -> tuple[Any, ...]:
        if self.session is None:
            return ()
        events = self.session.events[self.sent:]
        self.sent = len(self.session.events)
        return tuple(events)


# An answer's value when the answer would be over the judge's frame budget.
_TOO_LARGE = {"$opaque": {"type": "value", "repr": "too large to send to the judge"}}


class Runner:
    def __init__(self, conn: Connection, gpu_share: float = 1.0) -> None:
        self.conn = conn
        self.gpu_share = gpu_share  # the part of the GPU's memory a real CUDA session may fill
        self.levels: list[_Level] = []
        self.toplevel: TopLevel | None = None
        self.sources: dict[str, Source] = {}
        self.code = NO_LEARNER_CODE  # where the learner's modules live, once its top level is there
        self._handles = 0
        self._seq = 0  # the request being answered: every frame sent meanwhile carries its number
        self.fresh_modes = torchstate.capture()  # PyTorch's grad, dtype and autocast modes before any learner code

    # -- the top level ------------------------------------------------------------------------
    def start(self, start: Start) -> None:
        self.sources = dict(start.sources)
        limits = TopLevelLimits(start.cell_timeout_s, start.budget_s, frozenset(start.skip), frozenset(start.shown),
                                None if start.run is None else frozenset(start.run))
        place_helpers(start.helpers, start.workdir)
        self.toplevel = TopLevel(self.sources, start.workdir, limits, self._tell)
        self.toplevel.timed_out.update(start.timed_out)
        self.code = LearnerCode(tuple(sorted(self.toplevel.learner_dirs())), preloaded_modules())
        self.toplevel.run_all()
        self.conn.send(Ready(), self._seq)

    def _tell(self, event: TopLevelEvent) -> None:
        self.conn.send(event, self._seq)

    def serve(self, start: Start, seq: int) -> None:
        """Run the top level (``start`` was request ``seq``), then answer requests until the judge hangs up."""
        self._seq = seq
        self.start(start)
        while True:
            try:
                self._seq, request = self.conn.receive_numbered(JudgeRequest)
            except EOFError:
                return
            self.reply(self.answer(request))

    def reply(self, answer: Any) -> None:
        """Send ``answer``; one the judge would refuse as too large (a value of 10,000 large tensors)
        goes without its value, which the check then reads as an opaque one."""
        try:
            self.conn.send(answer, self._seq)
        except ProtocolError:
            if isinstance(answer, Returned):
                self.conn.send(dataclasses.replace(answer, value=_TOO_LARGE, after=()), self._seq)
            elif isinstance(answer, Answer):
                self.conn.send(Answer(_TOO_LARGE), self._seq)
            else:
                self.conn.send(Failed("an answer too large to send"), self._seq)

    # -- one request --------------------------------------------------------------------------
    def answer(self, request: Any) -> Any:
        try:
            if isinstance(request, Call):
                return self.call(request)
            if isinstance(request, OpenDevice):
                return self.open_device(request)
            if isinstance(request, OpenWorld):
                return self.open_world(request)
            if isinstance(request, Close):
                return self.close()
            if isinstance(request, Reset):
                return self.reset()
            if isinstance(request, Build):
                return self.build(request)
            if isinstance(request, Value):
                return self.value(request)
            if isinstance(request, Query):
                return self.query(request)
        except (Exception, ProtocolError) as exc:  # noqa: BLE001 - the judge decides what it means
            return Failed(cut(f"{type(exc).__name__}: {exc} ({_grader_frame(exc)})", 400))
        return Failed(f"unexpected request {type(request).__name__}")

    def _innermost(self) -> _Level | None:
        return self.levels[-1] if self.levels else None

    def _session(self) -> Session | None:
        return next((level.session for level in reversed(self.levels) if level.session is not None), None)

    def open_device(self, request: OpenDevice) -> DeviceOpened:
        session = open_session(request, self.code, self.gpu_share)
        stack = contextlib.ExitStack()
        stack.enter_context(session)
        asked = self._ask_again(stack)  # a session records nothing as it opens: what it holds then is theirs
        self.levels.append(_Level(stack, session, sent=len(session.events) if asked else 0))
        return DeviceOpened(session.mode, session.label)

    def open_world(self, request: OpenWorld) -> Answer:
        stack = contextlib.ExitStack()
        stack.enter_context(world(self.code, cuda=request.cuda, mps=request.mps, mps_built=request.mps_built,
                                  cuda_count=request.cuda_count))
        self._ask_again(stack)
        self.levels.append(_Level(stack))
        return Answer(None)

    def _ask_again(self, stack: contextlib.ExitStack) -> bool:
        """The top-level statements that asked which machine this is, run again on the one just opened
        (grader/learner/onmachine.py); whether there were any. What they did there is not the check's: the
        caller sends none of its events."""
        if self.toplevel is None or not self.toplevel.machine_statements:
            return False
        stack.enter_context(asked_again(self.toplevel.machine_statements, self.toplevel.alarm, TimeUp))
        return True

    def close(self) -> Closed:
        if not self.levels:
            return Closed()
        level = self.levels.pop()
        events = level.new_events()
        level.built.clear()
        level.context.close()
        return Closed(events)

    def reset(self) -> Answer:
        while self.levels:  # a check that ended inside a session (its failure) left it open
            self.close()
        torchstate.drop_modes()  # a fresh process has no torch-function or dispatch modes, nor a default device
        torchstate.restore(self.fresh_modes)  # each check starts as in a fresh process, whatever the top level left
        torch.set_num_threads(_NUM_THREADS)
        if torch.cuda.is_available() or torch.backends.mps.is_available():
            torch.manual_seed(0)  # the accelerator's generator too
        else:  # torch.manual_seed would also queue CUDA's seeding, formatting the whole stack each check, for a
            torch.default_generator.manual_seed(0)  # CUDA this build never starts (1-2 % of a batch learner)
        clear_learner_caches(self.code)
        return Answer(None)

    def build(self, request: Build) -> Answer:
        session = self._session()
        device = session.device if session is not None else torch.device("cpu")
        args = decode_value(list(request.args))
        parts = problems.build(request.recipe, args, device)
        level = self._innermost()
        if level is None:
            raise RuntimeError("a recipe is built inside a session")
        self._handles += 1
        level.built[self._handles] = parts
        return Answer([self._handles, [type(part).__name__ for part in parts]])

    def _resolve(self, handle: int, part: int) -> Any:
        for level in reversed(self.levels):
            if handle in level.built:
                return level.built[handle][part]
        raise ProtocolError(f"no built object {handle}")

    def _where(self) -> Where:
        """Which device a tensor is on, as the open session says (a stand-in's are CPU tensors underneath)."""
        session = self._session()
        return session.device_of if session is not None else real_device

    def _place(self, tensor: torch.Tensor, device: str) -> torch.Tensor:
        session = self._session()
        if device == "cpu" or session is None:
            return tensor
        return place(tensor, session.device, getattr(session, "standin", None))

    def query(self, request: Query) -> Answer:
        if request.what == "inspect":
            handle, part = request.handle
            return Answer(problems.inspect(self._resolve(handle, part), self._where()))
        session = self._session()
        if session is None:
            raise RuntimeError("no device session")
        if request.what == "live_bytes":
            return Answer(session.live_bytes())
        return Answer(session.fill_capacity(request.arg))

    def value(self, request: Value) -> Answer | Raised:
        assert self.toplevel is not None
        source = self.sources[request.exercise]
        found = lookup(self.toplevel, source, request.name)
        if found is None:
            return Raised("not_attempted", request.name)
        return Answer(encode_value(found, where=self._where()))

    def call(self, request: Call) -> Returned | Raised:
        assert self.toplevel is not None
        source = self.sources[request.exercise]
        args = decode_value(list(request.args), resolve=self._resolve, place=self._place)
        kwargs = decode_value({"$dict": [[k, v] for k, v in request.kwargs.items()]}, resolve=self._resolve,
                              place=self._place)
        level = self._innermost()
        measured: dict[str, Any] = {}
        label = level.session.label if level is not None and level.session is not None else "cpu"

        def invoke(func: Any) -> Any:
            with contextlib.ExitStack() as stack:
                if request.meter or request.meter_budget is not None:
                    session = self._session()
                    meter = stack.enter_context(metered(request.meter_budget, f"{label} (grader's budget)",
                                                        None if session is None else session.meters))
                    stack.callback(lambda: measured.update(peak=meter.peak))
                if request.watch_amp:
                    calls = stack.enter_context(watch_amp())
                    stack.callback(lambda: measured.update(calls.figures()))
                if request.count_steps:
                    steps = stack.enter_context(counted_steps())
                    stack.callback(lambda: measured.update(steps))
                return func(*args, **kwargs)

        with _printed() as tee:
            outcome: Outcome = call(self.toplevel, source, request.function, invoke, request.deadline_s)
        printed = cut(tee.kept.getvalue())
        events = level.new_events() if level is not None else ()
        if not outcome.returned:
            return Raised(outcome.kind, outcome.hung.rpartition(".")[2] or request.function, outcome.text,
                          outcome.where, printed, events, outcome.handling, outcome.files_full)
        after = tuple(encode_tensor(a, self._where()) if isinstance(a, torch.Tensor) and not _built(a, level) else None
                      for a in args)
        return Returned(encode_value(outcome.value, where=self._where()), printed, after, events, measured)


def _built(value: Any, level: _Level | None) -> bool:
    return level is not None and any(value is part for parts in level.built.values() for part in parts)


def _grader_frame(exc: BaseException) -> str:
    """Where in the grader's own code a request failed: the line a bug report needs."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/grader/" in f.filename]
    return f"{frames[-1].filename.rsplit('/grader/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"
