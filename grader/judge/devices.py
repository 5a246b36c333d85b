"""The devices a check grades on: the CPU, and each accelerator kind, real or stand-in.

A learner's function can be handed the CPU, CUDA or MPS, so a check runs it on each kind it
names — ``for dev in devices("cpu", "cuda", "mps"):`` — and a mistake confined to one device
(autocast only when ``device.type == "cuda"``, ``torch.cuda.synchronize()`` on an Apple GPU)
loses the points with a message naming that device. An accelerator kind is the real device
when the machine has it (and the check can judge fairly there, ``real_ok``), else its stand-in
on the CPU (grader/emulation/standin.py). The judge decides which, from the facts the learner
process sent before any learner code ran (``Hello``): nothing the learner's code does changes it.

``with dev:`` opens the session in the learner process; calls inside run there, and their
events (``dev.events``) and printed text (``dev.printed``) come back with each answer.
``dev.live_bytes()`` asks the session and ``dev.fill_capacity()`` is the judge's own figure on a
stand-in (grader/judge/evidence.py validates what the session says); ``dev.build("ex4.problem")``
has it build a recipe's objects (grader/reference/problems.py) and ``dev.inspect(model)`` reads
one back; ``dev.put(tensor)`` sends a tensor to live on the device. A check's failure inside
``with dev:`` is labelled with the device, so its message says where it happened.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from grader.judge import evidence
from grader.judge.outcomes import CheckFailed, LearnerRaised, Tampered
from grader.judge.proxy import Built, Figures, LearnerGone, LearnerProcess
from grader.reference.device import CAPABILITY, NAMES, TOTAL_MEMORY, CostModel
from grader.wire.messages import (
    Answer,
    Build,
    Close,
    Closed,
    CudaFacts,
    DeviceKind,
    DeviceMode,
    DeviceOpened,
    Event,
    Hello,
    OpenDevice,
    OpenWorld,
    Query,
    RecipeName,
    Smaller,
)
from grader.wire.values import DEVICE_ATTR

STANDIN_CUDA = CudaFacts(NAMES["cuda"], CAPABILITY, TOTAL_MEMORY, 1)


def real_accelerator_type(hello: Hello) -> DeviceKind | None:
    """The machine's real accelerator, as the learner process found it before any learner code ran."""
    return "cuda" if hello.cuda is not None else "mps" if hello.mps else None


def runs_amp(hello: Hello, mode: DeviceMode, dtype: torch.dtype) -> bool:
    """Whether a real device of this mode runs autocast in ``dtype`` (float16: with GradScaler).

    A check never demands what the hardware cannot do: where this is False the check grades on
    the stand-in instead (a T4 has no fast bfloat16; an MPS before macOS 14 has no bfloat16).
    """
    if mode == "cuda":
        return dtype != torch.bfloat16 or hello.cuda_bf16
    if mode == "mps":  # untested: no Mac has run this yet
        return hello.mps_bf16 if dtype == torch.bfloat16 else hello.mps_grad_scaler
    return True


class RemoteDevice:
    """A device session in the learner process, as a check uses it."""

    def __init__(self, learner: LearnerProcess, kind: DeviceKind, *, standin: bool, virtual_clock: bool = False,
                 budget_bytes: int | None = None, typed_oom: bool = False, smaller: Smaller = 1,
                 on_enter: Callable[[RemoteDevice], None] | None = None) -> None:
        self.learner = learner
        self.device = torch.device(kind)
        self.virtual = standin
        self.mode: DeviceMode = "standin" if standin else kind
        if kind == "cpu":
            self.label = "cpu"
        elif standin:
            self.label = f"{kind} (stand-in)"
        else:
            self.label = f"{kind} ({learner.hello.cuda.name if kind == 'cuda' and learner.hello.cuda else 'Apple GPU'})"
        self.events: list[Event] = []
        self.printed = ""
        self._smaller: Smaller = smaller if standin else 1  # a real device runs the size drawn
        self._request = OpenDevice(kind, standin, virtual_clock, budget_bytes, typed_oom, self._smaller)
        self._on_enter = on_enter
        self._costs = CostModel().smaller(self._smaller)
        self._budget = budget_bytes
        self._timeline: evidence.StandInTimeline | None = None  # each ``with dev:`` is a fresh stand-in

    # -- what checks read -------------------------------------------------------------------
    def size(self, n: int) -> int:
        """The side a problem drawn at ``n`` runs at in this session: ``n`` on the CPU and a real device,
        ``n // smaller`` on a stand-in opened ``smaller`` (whose cost model reads the times of ``n``)."""
        return n // self._smaller

    def matmul_seconds(self, n: int) -> float:
        """One matmul drawn at n×n, run at ``size(n)``, on the stand-in's cost model (stand-ins only: a
        real GPU is measured): the same virtual time whatever ``smaller`` the session was opened with."""
        return 2.0 * self.size(n) ** 3 / self._costs.gpu_flops

    def cuda_facts(self) -> CudaFacts:
        """What torch.cuda says of this device: the stand-in's constants, or the real GPU's facts."""
        return self.learner.hello.cuda if not self.virtual and self.learner.hello.cuda else STANDIN_CUDA

    def holds(self, dtype: torch.dtype) -> bool:
        """Whether tensors of ``dtype`` can live here (MPS, real or stand-in, has no float64)."""
        return not (self.device.type == "mps" and dtype == torch.float64)

    def live_bytes(self) -> int:
        return self._number(Query("live_bytes"))

    def fill_capacity(self, chunk_bytes: int) -> int:
        """How many chunks of ``chunk_bytes`` fit under the session's memory budget. On a stand-in and
        the CPU the judge knows: the budget it set, over the chunk. A real GPU's caching allocator
        reserves whole segments, so there the learner process measures it before the learner's call
        — its answer is bounded by the budget (no more chunks than the budget holds), never taken as is."""
        if self._budget is None:
            raise ValueError("fill_capacity() needs a session opened with budget_bytes")
        most = self._budget // chunk_bytes
        if self.virtual or self.device.type == "cpu":
            return most
        measured = self._number(Query("fill_capacity", chunk_bytes))
        if not 0 <= measured <= most:
            raise Tampered("tampered.fill_capacity", chunks=measured, chunk_bytes=chunk_bytes, budget=self._budget)
        return measured

    def _number(self, query: Query) -> int:
        """A count or a size the learner process measured: an int between 0 and 2**48, else Tampered."""
        value = self.learner.decode(self.learner.expect(query, Answer).value)
        if type(value) is not int or not 0 <= value <= evidence.MAX_BYTES:
            raise Tampered("tampered.figure", name=query.what, value=str(value)[:40])
        return value

    def build(self, recipe: RecipeName, *args: Any) -> tuple[Built, ...]:
        answer = self.learner.expect(Build(recipe, tuple(args)), Answer)
        handle, types = answer.value
        return tuple(Built(int(handle), part, str(name)) for part, name in enumerate(types))

    def inspect(self, built: Built) -> Any:
        """A built object's state now: a model's ``{"device": ..., "params": [tensors]}``."""
        answer = self.learner.expect(Query("inspect", handle=(built.handle, built.part)), Answer)
        return self.learner.decode(answer.value)

    def instruments(self, *, meter: bool = False, meter_budget: int | None = None, watch_amp: bool = False,
                    count_steps: bool = False) -> contextlib.AbstractContextManager[Figures]:
        """``with dev.instruments(meter=True) as figures:`` — calls inside are measured
        (grader/judge/proxy.py ``Figures``)."""
        return self.learner.instruments(meter=meter, meter_budget=meter_budget, watch_amp=watch_amp,
                                        count_steps=count_steps)

    def put(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` to be created on this device in the learner process (not copied there: no event)."""
        setattr(tensor, DEVICE_ATTR, self.device.type)
        return tensor

    def heard(self, events: tuple[Event, ...], printed: str) -> None:
        """A call's events and printed text. A stand-in's events must hold together as one virtual
        timeline, a real device's be numbers (grader/judge/evidence.py): else Tampered."""
        if self._timeline is not None:
            self._timeline.heard(events)
        else:
            evidence.real_events(events)
        self.events.extend(events)
        self.printed += printed

    def graded_from_earlier(self) -> None:
        """This check grades on this device from what an earlier check of the grading saw here, without a
        session of its own: the report still says where it graded."""
        if self._on_enter is not None:
            self._on_enter(self)

    # -- the session ------------------------------------------------------------------------
    def __enter__(self) -> RemoteDevice:
        if self._on_enter is not None:
            self._on_enter(self)
        self.learner.expect(self._request, DeviceOpened)
        if self.virtual:
            self._timeline = evidence.StandInTimeline(self.device.type)
        self.learner.devices.append(self)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if isinstance(exc, (CheckFailed, LearnerRaised)):
            exc.params.setdefault("device", self.label)
        if isinstance(exc, LearnerGone):
            return
        self.learner.devices.remove(self)
        closed = self.learner.expect(Close(), Closed)
        self.heard(closed.events, "")


class RemoteWorld:
    """ex1: for the duration the learner process's PyTorch reports these devices, consistently."""

    def __init__(self, learner: LearnerProcess, *, cuda: bool, mps: bool, mps_built: bool = False,
                 cuda_count: int = 1) -> None:
        self.learner = learner
        self._request = OpenWorld(cuda, mps, mps_built, cuda_count)
        self.situation = f"cuda={cuda}, mps={mps}" + (", MPS built in but not available" if mps_built and not mps
                                                       else "")
        self.expected = torch.device("cuda" if cuda else "mps" if mps else "cpu")

    def __enter__(self) -> RemoteWorld:
        self.learner.expect(self._request, Answer)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not isinstance(exc, LearnerGone):
            self.learner.expect(Close(), Closed)


Device = RemoteDevice  # what a check's signature names
