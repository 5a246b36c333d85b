"""The learner's code as checks see it: a module whose functions run in the learner process.

``ex3.roundtrip(x, dev.device)`` sends the call (its arguments as plain data), waits for the
answer and returns the value the learner's function returned, rebuilt here as base tensors,
arrays and Python values. A call that raised becomes LearnerRaised (with the learner's own line),
a missing function or NotImplementedError becomes NotAttempted, one past its deadline TimedOut:
so a check body reads like the exercise. Tensor arguments come back updated (what the learner's
function did to them), and what it printed and the device's events go to the open device
(grader/judge/devices.py).

If the learner process ends, stops answering or sends what is not a message, ``LearnerGone``
ends the check — and the judge (grader/judge/): the grader settles that check and carries on
with a fresh pair of processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from grader.judge import evidence
from grader.judge.outcomes import AlreadyTimedOut, LearnerRaised, LearnerSideFailed, NotAttempted, TimedOut
from grader.wire.codec import ProtocolError, cut
from grader.wire.framing import Connection
from grader.wire.messages import (
    START_SEQ,
    Answer,
    Call,
    Calling,
    Cell,
    Event,
    Failed,
    FunctionTimedOut,
    Hello,
    LearnerMessage,
    LostReason,
    Raised,
    Ready,
    Reset,
    Returned,
    Start,
    TopLevelEvent,
    Value,
)
from grader.wire.values import DEVICE_ATTR, decode_value, device_of, encode_value, reference


class OpenSession(Protocol):
    """What a call's answer tells the innermost open device session (grader/judge/devices.py
    ``RemoteDevice``): the events the learner's code made there and what it printed."""

    label: str

    def heard(self, events: tuple[Event, ...], printed: str) -> None: ...


class LearnerGone(BaseException):  # noqa: N818 - not an error of the check's: the process is gone
    """The learner process ended, stopped answering or broke the protocol. A BaseException: no
    check's ``except`` catches it."""

    def __init__(self, reason: LostReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class Figures:
    """What a call's instruments measured (``with learner.instruments(...) as figures``)."""

    peak: int = 0
    scale: int = 0
    step: int = 0
    update: int = 0
    disabled: int = 0
    deprecated: list[str] = field(default_factory=list)
    optimizer_steps: int = 0

    def add(self, measured: Mapping[str, Any]) -> None:
        """One call's figures, each validated first (grader/judge/evidence.py): a malformed or
        impossible one is Tampered, never a grader's error."""
        checked = evidence.figures(measured)
        self.peak = max(self.peak, checked["peak"])
        for name in evidence.COUNTERS:
            setattr(self, name, getattr(self, name) + checked[name])
        self.deprecated += checked["deprecated"]


@dataclass
class _Options:
    meter: bool = False
    meter_budget: int | None = None
    watch_amp: bool = False
    count_steps: bool = False
    figures: Figures = field(default_factory=Figures)


class Built:
    """The objects a recipe built in the learner process: pass them to the learner's functions as
    they are (``model, inputs, targets, optimizer = dev.build("ex4.problem")``)."""

    def __init__(self, handle: int, part: int, type_name: str) -> None:
        self.handle, self.part, self.type_name = handle, part, type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} built in the learner process>"


def _encode(value: Any) -> Any:
    """A check's argument as plain data; built objects as references the learner process resolves."""
    if isinstance(value, Built):
        return reference(value.handle, value.part)
    if type(value) in (tuple, list) and any(isinstance(v, Built) for v in value):
        items = [_encode(v) for v in value]
        return {"$tuple": items} if type(value) is tuple else items
    return encode_value(value, where=device_of)  # a tensor put on a device (dev.put) says so


def top_level_event(event: TopLevelEvent, cells: Mapping[str, tuple[Cell, ...]]) -> TopLevelEvent:
    """A top-level event as the judge relays it: about a module and a cell it sent (its label the
    judge's own), with at most a few hundred characters of the learner's text. Anything else is the
    learner process's protocol break: four forged events with 50 MB labels once cost the grader's
    process 21 s of CPU to read back."""
    if event.module not in cells:
        raise ProtocolError("a top-level event about a module the judge never sent")
    known = cells[event.module]
    if event.event in ("importing", "imported"):
        return TopLevelEvent(event.event, event.module)
    if not 0 <= event.index < len(known) or event.label != known[event.index].label:
        raise ProtocolError("a top-level event about a cell the judge never sent")
    stop = event.stop
    if stop is not None:
        if (stop.module, stop.index, stop.label) != (event.module, event.index, event.label):
            raise ProtocolError("a cell's stop about another cell")
        stop = dataclasses.replace(stop, line=stop.line if stop.line is None or 0 < stop.line < 10**6 else None,
                                   error=cut(stop.error, 300), kept=_names(stop.kept))
    return TopLevelEvent(event.event, event.module, event.index, event.label, stop, _names(event.kept))


def _names(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name[:60] for name in names[:50])


class LearnerProcess:
    """The judge's end of the socket: one request, one answer, in order."""

    def __init__(self, conn: Connection, hello: Hello, report: Callable[[Any], None]) -> None:
        self.conn = conn
        self.hello = hello
        self.report = report  # to the grader (the signed channel)
        self.devices: list[OpenSession] = []  # open device sessions, innermost last
        self.in_flight: str | None = None  # the learner function a call waits on
        self.check_deadline = time.monotonic() + 30.0  # set by the judge when a check starts
        self._options: list[_Options] = []
        self._seq = START_SEQ  # the last request's number: Start's, sent by grader/judge/__main__.py

    def ask(self, request: Any) -> Any:
        """Send ``request``; its answer. A Failed answer says the grader's code in the learner process
        failed — after the learner's code ran there, so the learner process's word, never the
        grader's verdict on itself: LearnerSideFailed (the learner's ``error``)."""
        self._seq += 1
        try:
            self.conn.send(request, self._seq)
            answer = self.conn.receive(LearnerMessage, seq=self._seq)
        except (EOFError, OSError) as exc:
            raise LearnerGone("ended", str(exc)) from None
        except ProtocolError as exc:
            raise LearnerGone("broke_protocol", str(exc)) from None
        if isinstance(answer, Failed):
            raise LearnerSideFailed(answer.error)
        return answer

    def top_level(self, start: Start, relay: Callable[[Any], None]) -> None:
        """The learner's top level, which ``start`` began (grader/judge/__main__.py sent it): its events,
        cell by cell, go to ``relay`` until it is ready. Each is relayed only as the cells the judge sent
        make it possible (``top_level_event``)."""
        cells = {source.module: source.cells for source in start.sources.values()}
        try:
            while True:
                message = self.conn.receive(TopLevelEvent | Ready, seq=START_SEQ)
                if isinstance(message, Ready):
                    return
                relay(top_level_event(message, cells))
        except (EOFError, OSError) as exc:
            raise LearnerGone("ended", str(exc)) from None
        except ProtocolError as exc:
            raise LearnerGone("broke_protocol", str(exc)) from None

    def expect(self, request: Any, kind: type) -> Any:
        answer = self.ask(request)
        if not isinstance(answer, kind):
            raise LearnerGone("broke_protocol", f"a {type(answer).__name__} answering a {type(request).__name__}")
        return answer

    def reset(self) -> None:
        """A check starts: the learner process puts PyTorch's defaults back (``Reset``)."""
        self.expect(Reset(), Answer)

    @contextlib.contextmanager
    def instruments(self, *, meter: bool = False, meter_budget: int | None = None,
                    watch_amp: bool = False, count_steps: bool = False) -> Iterator[Figures]:
        """Calls inside are measured: the peak of live tensors (``meter``; past ``meter_budget`` bytes
        they run out of memory), GradScaler's calls and deprecated AMP APIs (``watch_amp``), the
        optimizer steps taken (``count_steps``)."""
        options = _Options(meter, meter_budget, watch_amp, count_steps)
        self._options.append(options)
        try:
            yield options.figures
        finally:
            self._options.remove(options)

    def decode(self, data: Any) -> Any:
        try:
            return decode_value(data)
        # decode_value refuses what is not a value (ProtocolError); the rest is a backstop for a
        # value it let through that torch or numpy would not build, or the judge's memory limit.
        except (ProtocolError, TypeError, ValueError, KeyError, RuntimeError, OverflowError, MemoryError) as exc:
            raise LearnerGone("broke_protocol", f"a malformed value: {cut(str(exc), 200)}") from None

    def call(self, exercise: str, module: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        options = self._options[-1] if self._options else _Options()
        function = f"{module}.{name}"
        self.report(Calling(function))
        request = Call(exercise, name, tuple(_encode(a) for a in args), {k: _encode(v) for k, v in kwargs.items()},
                       deadline_s=max(self.check_deadline - time.monotonic(), 0.5),
                       meter=options.meter, meter_budget=options.meter_budget, watch_amp=options.watch_amp,
                       count_steps=options.count_steps)
        self.in_flight = function
        answer = self.ask(request)
        self.in_flight = None
        if not isinstance(answer, (Returned, Raised)):
            raise LearnerGone("broke_protocol", f"a {type(answer).__name__} answering a call")
        device = self.devices[-1] if self.devices else None
        if device is not None:
            device.heard(answer.events, answer.printed)
        if isinstance(answer, Raised):
            self._raise(answer, function, device)
        assert isinstance(answer, Returned)
        options.figures.add(answer.measured)
        for arg, after in zip(args, answer.after, strict=False):
            if isinstance(arg, torch.Tensor) and after is not None:
                _update(arg, self.decode(after))
        return self.decode(answer.value)

    def _raise(self, answer: Raised, function: str, device: OpenSession | None) -> None:
        name = answer.name[:80]
        if answer.kind == "not_attempted":
            raise NotAttempted(name)
        if answer.kind == "already_timed_out":
            raise AlreadyTimedOut(name)
        if answer.kind == "timed_out":
            self.report(FunctionTimedOut(function))
            raise TimedOut(name)
        raised = LearnerRaised(answer.text, answer.where, name, answer.handling, files_full=answer.files_full is True)
        if device is not None:
            raised.params["device"] = device.label
        raise raised

    def value(self, exercise: str, name: str) -> Any:
        answer = self.ask(Value(exercise, name))
        if isinstance(answer, Raised):
            raise NotAttempted(name)
        if not isinstance(answer, Answer):
            raise LearnerGone("broke_protocol", f"a {type(answer).__name__} answering a value")
        return self.decode(answer.value)


def _update(tensor: torch.Tensor, after: Any) -> None:
    """The judge's copy of an argument, as the learner's function left it (values, device)."""
    if not isinstance(after, torch.Tensor):
        return
    with torch.no_grad():
        tensor.data = after.detach()
    setattr(tensor, DEVICE_ATTR, getattr(after, DEVICE_ATTR, "cpu"))


class LearnerModule:
    """One exercise's learner module: ``ex3.roundtrip(...)`` calls it in the learner process."""

    def __init__(self, process: LearnerProcess, exercise: str, module: str) -> None:
        self._process = process
        self._exercise = exercise
        self._module = module

    def value(self, name: str) -> Any:
        """A module-level value (``SMALL_N_ANSWER``); NotAttempted when it is not there."""
        return self._process.value(self._exercise, name)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._process.call(self._exercise, self._module, name, args, kwargs)

        return call
