"""Live-tensor memory on any device, measured at the ATen level.

A TorchDispatchMode sees every op output, also those autograd makes during backward, so
it can count the bytes of the storages that are alive — the CPU twin of
torch.cuda.memory_allocated(). With a budget it raises torch.OutOfMemoryError like the CUDA
caching allocator does when the learner's live tensors would exceed it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grader.reference.modes import LeavesFromUnder
from grader.wire.messages import MiB

# What StorageWeakRef.expired() asks, of its handle (``Held``), without its two Python frames (5
# times faster: 0.25 vs 1.2 µs). A meter and a stand-in ask it of every storage they hold whenever an
# op allocates.
handle_expired = torch.UntypedStorage._expired


# A tensor's storage key (its StorageImpl's address, ``untyped_storage()._cdata``) in one C call that builds no
# storage object and that no torch-function handler sees: a meter and a stand-in ask it for every tensor of
# every op, and the storage objects built only to read it and thrown away (under DisableTorchFunction, for
# the stand-in) were 5 % of a training's instructions on a stand-in (callgrind, 82.4 -> 78.3 M). A private
# function of torch's (torch/csrc/Module.cpp): where a release has none, or it answers anything but the
# storage object's ``_cdata`` for a probe (then it is not what this relies on), ``storage_key`` answers None.
def _checked_storage_id() -> Callable[[torch.Tensor], int] | None:
    found: Callable[[torch.Tensor], int] | None = getattr(torch._C, "_storage_id", None)
    probe = torch.empty(2)
    try:
        return found if found is not None and found(probe[1:]) == probe.untyped_storage()._cdata else None
    except (RuntimeError, TypeError):
        return None


_STORAGE_ID = _checked_storage_id()


def storage_key(t: torch.Tensor) -> int | None:
    """``t.untyped_storage()._cdata``, where one C call answers it; None where it does not (a tensor with
    no storage of its own, as a sparse one; a PyTorch without the call): then the caller asks the storage."""
    if _STORAGE_ID is None:
        return None
    try:
        return _STORAGE_ID(t)
    except (RuntimeError, NotImplementedError):
        return None


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


class Held:
    """One storage a ``Storages`` holds: its weak handle, which says exactly whether it is alive
    (``handle_expired``); its bytes, and whether they count towards the live total (a stand-in's pinned host
    memory does not); and the Python weak reference that tells the holder when to look.

    The handle is what torch's ``StorageWeakRef`` holds, owned here without that class's Python layer:
    one is made for each new storage of every op on a stand-in, and a dataclass around a StorageWeakRef
    took 1.1 of the ~5 us a new storage cost (this: 0.4)."""

    __slots__ = ("counted", "handle", "nbytes", "watch")
    # (held by the class: at exit the torch module may be cleared first)
    _free: ClassVar[Callable[[int], object]] = torch.UntypedStorage._free_weak_ref

    def __init__(self, storage: torch.UntypedStorage, nbytes: int, counted: bool,
                 watch: weakref.ref[torch.UntypedStorage]) -> None:
        self.handle: int = cast(int, storage._weak_ref())  # (an int: torch's stub says a storage)
        self.nbytes = nbytes
        self.counted = counted
        self.watch = watch

    def __del__(self) -> None:
        type(self)._free(self.handle)


class Storages:
    """Storages by address (``storage._cdata``) and the bytes of those alive, asked at every op that
    allocates (a meter's peak, a stand-in's memory_allocated and budget).

    Which storages died is asked only of those that may have: each storage's Python object (PyTorch
    keeps it as long as the storage lives, and releases it when the storage dies) carries a weak
    reference whose callback notes the address; ``live_bytes`` asks the exact reference of those
    noted since the last time. Asking every held storage, as this did, made each allocation cost as
    many C calls as storages alive: quadratic in a learner's live tensors (4000 tensors of four floats
    on a stand-in took 1.0 s, against 0.17 s for 1000). Python's garbage collector can clear a weak
    reference while its object lives on (a storage's object in an unreachable cycle, pytorch#145253);
    an address found alive after its callback ran is asked at every ``live_bytes`` from then on."""

    def __init__(self) -> None:
        self._held: dict[int, Held] = {}
        self._bytes = 0  # the counted bytes of what _held holds
        self._noted: set[int] = set()  # addresses whose storage's Python object was released since the last look
        self._asked: set[int] = set()  # addresses asked at the next look: once, or every time if found alive

    def alive(self, key: int) -> Held | None:
        """What is held at ``key`` while its storage lives; a storage found freed is forgotten."""
        held = self._held.get(key)
        if held is not None and handle_expired(held.handle):
            self.forget(key)
            return None
        return held

    def add(self, key: int, storage: torch.UntypedStorage, nbytes: int, *, counted: bool) -> None:
        """Hold ``storage`` (at ``key``, where nothing alive is held)."""
        self.forget(key)
        noted = self._noted

        def released(_: object, key: int = key) -> None:
            noted.add(key)

        self._held[key] = Held(storage, nbytes, counted, weakref.ref(storage, released))
        if counted:
            self._bytes += nbytes

    def forget(self, key: int) -> None:
        held = self._held.pop(key, None)
        self._noted.discard(key)
        self._asked.discard(key)
        if held is not None and held.counted:
            self._bytes -= held.nbytes

    def live_bytes(self) -> int:
        """The counted bytes of the storages still alive."""
        noted = self._noted  # the set every callback adds to (popped one by one: a storage may die meanwhile)
        if not noted and not self._asked:  # (most ops: none died since the last look)
            return self._bytes
        while noted:
            self._asked.add(noted.pop())
        for key in list(self._asked):  # (copied at once: another thread's op may add or forget meanwhile)
            if self.alive(key) is None:  # freed (and forgotten), or no longer held
                self._asked.discard(key)
        return self._bytes  # (one found alive after its callback stays asked)

    def count(self) -> int:
        """How many counted storages are alive."""
        self.live_bytes()
        return sum(1 for held in list(self._held.values()) if held.counted)


_CONTAINERS = (list, tuple, dict)
_NESTED = 16  # how deep ``tensors`` recurses before it walks a subtree with a stack of its own


def tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors in an op's arguments or outputs (nested tuples, lists, dicts), in order: pytree
    costs too much for every op of a training loop (its walk was a tenth of a metered step). The
    meter, the stand-in and the observer all walk with this (grader/emulation/ops.py), two or three
    times an op: a loop over each container, recursing into the few nested ones (an op's ``(args,
    kwargs)`` in 0.9 µs, 1.3 with one stack for everything), and past ``_NESTED`` levels a stack, so
    that no nesting a learner's code passes (a list of lists 5000 deep) reaches Python's recursion limit."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    found: list[torch.Tensor] = []
    if isinstance(obj, _CONTAINERS):
        _walk(obj.values() if isinstance(obj, dict) else obj, found, 0)
    return found


def _walk(items: Iterable[Any], found: list[torch.Tensor], depth: int) -> None:
    for item in items:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, _CONTAINERS):  # (a dict: its values)
            inner = item.values() if isinstance(item, dict) else item
            if depth < _NESTED:
                _walk(inner, found, depth + 1)
            else:
                _walk_deep(inner, found)


def _walk_deep(items: Iterable[Any], found: list[torch.Tensor]) -> None:
    """``_walk`` without recursion: a stack of the iterators it is inside, each resumed where it stopped."""
    stack = [iter(items)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, torch.Tensor):
                found.append(item)
            elif isinstance(item, _CONTAINERS):
                stack.append(iter(item.values() if isinstance(item, dict) else item))
                break
        else:
            stack.pop()


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


class MemoryMeter(LeavesFromUnder, TorchDispatchMode):
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
        self._storages = Storages()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ in dynamo.disable, whose first call imports
        # torch._dynamo: 2-4 s per graded submission, for compilation we never do.
        return False

    def live_bytes(self) -> int:
        """The bytes of the storages still alive (asked at every allocating op)."""
        return self._storages.live_bytes()

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
            known = storage_key(leaf)
            if known is not None and self._storages.alive(known) is not None:  # (an op in place, a view)
                continue
            storage = leaf.untyped_storage()
            key = storage._cdata
            if known is None and self._storages.alive(key) is not None:
                continue
            size = storage.nbytes()
            self._storages.add(key, storage, size, counted=True)  # (a freed storage's address reused: replaced)
            new += size
            fresh.append(key)
        if not new:
            return None
        live = self.live_bytes()
        if self.budget is not None and live > self.budget:
            for key in fresh:
                self._storages.forget(key)
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
