"""What the learner's code runs on a real device (or the CPU), seen at the dispatcher.

Every aten op, forward and backward, classified as the stand-in classifies it (grader/emulation/ops.py):
a product, convolution or attention the FLOP counter counts is a ``matmul`` event, other arithmetic
an ``op`` event, a copy between the host and the device a transfer. The events of a real GPU and of
its stand-in so say the same things, whatever Python function the learner's code called.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grader.emulation import ops
from grader.reference.meter import MemoryMeter, counted, never_compiled, tensors
from grader.reference.modes import LeavesFromUnder
from grader.wire.messages import Event

Record = Callable[..., None]  # record(kind, device="", dtype="")


class Observer(LeavesFromUnder, TorchDispatchMode):
    def __init__(self, record: Record, events: list[Event], meters: list[MemoryMeter]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.record = record
        self.events = events  # the session's, to which ``record`` appends
        # The session's meters, counted here rather than each as a dispatch mode of its own
        # (grader/reference/meter.py ``counted``): a CPU session's own, then a call's.
        self.meters = meters

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # see grader/emulation/standin.py's dispatch mode

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = counted(self.meters, func, args, kwargs) if self.meters else func(*args, **kwargs)
        outputs = tensors(out)
        if not outputs:
            return out
        op = ops.classify(func)
        if op.transfer:
            self._transfer(func, args, kwargs, outputs)
        elif op.computes:
            self._compute(op, args, kwargs, out, outputs)
        return out

    def _transfer(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[torch.Tensor]) -> None:
        inputs = tensors(args)
        if func is ops.aten._to_copy.default:
            source, dest = inputs[0].device.type, outputs[0].device.type
            non_blocking = bool(kwargs.get("non_blocking"))
        elif len(inputs) > 1:
            source, dest = inputs[1].device.type, inputs[0].device.type
            non_blocking = len(args) > 2 and bool(args[2])
        else:
            return
        if source == "cpu" and dest != "cpu":
            self.record("h2d", dest)
        elif source != "cpu" and dest == "cpu":
            self.record("d2h_async" if non_blocking else "d2h", dest)

    def _compute(self, op: ops.Op, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any,
                 outputs: list[torch.Tensor]) -> None:
        device, dtype = outputs[0].device.type, str(outputs[0].dtype)
        if ops.flops(op, args, kwargs, out):
            self.record("matmul", device, dtype)
        elif op.arithmetic and tensors((args, kwargs)):
            last = self.events[-1] if self.events else None
            if not (last and last.kind == "op" and last.device == device and last.dtype == dtype):
                self.record("op", device, dtype)  # one event per run of ops on one device and dtype


never_compiled(Observer.__torch_dispatch__)
