"""Live-tensor memory on any device, measured at the ATen level.

A TorchDispatchMode sees every op output, also those autograd makes during backward, so
it can count the bytes of the storages that are alive — the CPU twin of
torch.cuda.memory_allocated(). With a budget it raises torch.OutOfMemoryError like the CUDA
caching allocator does when the learner's live tensors would exceed it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

from grader.wire.messages import MiB

# What StorageWeakRef.expired() asks, of its handle (``ref.cdata``), without its two Python frames (5
# times faster: 0.25 vs 1.2 µs). A meter and a stand-in ask it of every storage they hold whenever an
# op allocates.
handle_expired = torch.UntypedStorage._expired


def counted(meters: Sequence[MemoryMeter], op: Callable[..., Any], args: tuple[Any, ...],
            kwargs: dict[str, Any]) -> Any:
    """``op(*args, **kwargs)``, its output counted by each of ``meters`` in turn; the first past its
    budget raises its out-of-memory error. A dispatch mode that sees every op already (a session's:
    grader/emulation/observer.py, grader/emulation/standin.py) counts for the meters a call asks for
    with this, rather than each meter being a dispatch mode of its own: each mode is a trip from C++
    to Python and back for every op (an op in a CPU session: 19.4-19.9 µs with its meter as a mode
    of its own, 15.5 µs so, 2026-12-02).

    Every caller's frame stays clear of the refused output and of the error: the output is dropped
    before the error is raised, and the error is dropped as it is raised. Were a frame of the
    traceback to hold the error, that cycle (freed only by the garbage collector) would keep the
    op's inputs — a learner's activations — alive past the out-of-memory error its back-off caught
    (tests/test_reference.py)."""
    out = op(*args, **kwargs)
    for meter in meters:
        refused = meter.count(out)
        if refused is not None:
            del out
            try:
                raise refused
            finally:
                del refused
    return out


def storage_gone(ref: StorageWeakRef) -> bool:
    """Whether the storage ``ref`` points to was freed."""
    return bool(handle_expired(ref.cdata))


def tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors in an op's arguments or outputs (nested tuples, lists, dicts), in order: pytree
    costs too much for every op of a training loop (its walk was a tenth of a metered step). The
    meter, the stand-in and the observer all walk with this (grader/emulation/ops.py)."""
    found: list[torch.Tensor] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
    return found


def never_compiled(*functions: Any) -> None:
    """torch.compile in the learner's code never compiles the grader's modes (a meter, the observer,
    the stand-in). Dynamo skips a frame while a dispatch mode is on the stack, but a mode is off the
    stack while its own ``__torch_dispatch__`` runs: there Dynamo compiled the stand-in itself,
    guarded on the tensors alone, and replayed one session's device in the next ("cuda doesn't
    match the current accelerator mps"). These frames, and every frame they call, run as written
    (PyTorch's own per-code switch, in C: nothing of Dynamo imported)."""
    try:
        from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy
    except ImportError:  # a PyTorch without it: no Dynamo to keep out either
        return
    for function in functions:
        set_code_exec_strategy(function.__code__, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))


class MemoryMeter(TorchDispatchMode):
    """Counts live storages created while active; optionally enforces a budget in bytes."""

    def __init__(self, budget_bytes: int | None = None, device_label: str = "cuda:0",
                 error: Callable[[int, int, int], BaseException] | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves TorchDispatchMode.__init__ unannotated
        self.budget = budget_bytes
        self.device_label = device_label
        # What running out of the budget raises (asked, live, budget bytes): by default CUDA's
        # torch.OutOfMemoryError; the MPS stand-in raises MPS's plain RuntimeError.
        self.error = error or self._cuda_oom
        self.peak = 0
        self.ooms = 0
        self._live: dict[int, tuple[StorageWeakRef, int]] = {}  # storage address -> (weak reference, bytes)
        self._bytes = 0  # the sum of _live's bytes

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in dynamo.disable, whose first call imports
        # torch._dynamo: 2-4 s per graded submission, for compilation we never do.
        return False

    def live_bytes(self) -> int:
        """The bytes of the storages still alive (asked at every allocating op: one pass, one C call
        a storage, a running sum)."""
        for key in [key for key, (ref, _) in self._live.items() if handle_expired(ref.cdata)]:
            self._bytes -= self._live.pop(key)[1]
        return self._bytes

    def _forget(self, key: int) -> None:
        entry = self._live.pop(key, None)
        if entry is not None:
            self._bytes -= entry[1]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return counted((self,), func, args, kwargs or {})

    def count(self, out: Any) -> BaseException | None:
        """Count the storages of an op's output ``out`` that are new; past the budget, forget them
        again and return the out-of-memory error to raise (``counted`` raises it)."""
        new = 0
        fresh: list[int] = []
        for leaf in tensors(out):
            if leaf.is_meta:
                continue
            storage = leaf.untyped_storage()
            key = storage._cdata
            known = self._live.get(key)
            if known is not None and not storage_gone(known[0]):
                continue
            if known is not None:  # a freed storage's address, reused by this one
                self._forget(key)
            size = storage.nbytes()
            self._live[key] = (StorageWeakRef(storage), size)
            self._bytes += size
            new += size
            fresh.append(key)
        if not new:
            return None
        live = self.live_bytes()
        if self.budget is not None and live > self.budget:
            for key in fresh:
                self._forget(key)
            self.ooms += 1
            return self.error(new, live - new, self.budget)
        self.peak = max(self.peak, live)
        return None

    def _cuda_oom(self, asked: int, live: int, budget: int) -> BaseException:
        return torch.OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {asked / MiB:.2f} MiB "
            f"(grader's memory budget {budget / MiB:.2f} MiB on {self.device_label}; "
            f"{live / MiB:.2f} MiB already allocated; {max(budget - live, 0) / MiB:.2f} MiB free)"
        )


never_compiled(MemoryMeter.__torch_dispatch__)
