"""The learner's top-level statements that ask which machine this is, run again on each machine graded.

The lesson's own pattern ("device-agnostic"): once, at the top of the notebook,

    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")

"and then use the variable `device` everywhere". On a real machine that statement runs there: on a GPU
`device` is cuda, on a Mac mps. Here the learner's top level runs once, on the grading machine (a CPU),
before any stand-in session or any of ex1's simulated machines exists; so a `pick_device()` that returns
that `device` answered cpu on every simulated machine (94/100 for a submission right on every real one),
and a module-level `HAS_CUDA = torch.cuda.is_available()` that a function reads was False in the CUDA
stand-in's session.

So while the top level runs, PyTorch's functions that answer which devices this machine has
(``QUESTIONS``) tell ``Asked`` when they are called, wherever the learner's code holds them
(grader/emulation/patching.py ``heard``: the function objects stay the ones the learner's names hold).
A top-level statement that binds names, made no torch function call (the cell's products mode counts
them: grader/learner/longcalls.py), and asked, or read a name such a statement bound before it (nanochat's
``synchronize = torch.cuda.synchronize if device_type == "cuda" else lambda: None``), is a
``MachineStatement`` (grader/learner/toplevel.py). Each device session and each simulated machine runs
those statements again when it opens (``asked_again``), as the top level would have run on that machine,
and puts the names back when it closes. A statement that also computed with tensors (a demo training, a
model built on the device) is not run again: it is the demo's, not a question's; nor is one that binds
nothing (``print(device)``).

Not covered: a statement that changes PyTorch's state rather than binding a name
(``torch.set_default_device(...)`` at the top: every check starts without a default device anyway,
grader/learner/torchstate.py), and a machine question asked in a helper module the folder's exercise
imports (its import runs once).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch.overrides import TorchFunctionMode

from grader.emulation.patching import heard
from grader.reference.modes import LeavesFromUnder

# Where PyTorch answers which devices this machine has: (module, function names). Each is a Python function
# of PyTorch's own (or an lru_cache around one), which the stand-ins and ex1's worlds answer for.
QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch.cuda", ("is_available", "device_count", "current_device", "get_device_name", "get_device_properties",
                    "get_device_capability", "is_bf16_supported", "mem_get_info")),
    ("torch.backends.mps", ("is_available", "is_built")),
    ("torch.mps", ("is_available", "device_count")),
    ("torch.accelerator", ("is_available", "current_accelerator", "device_count", "current_device_index")),
)
RERUN_LIMIT_S = 1.0  # a question is answered in microseconds; a statement past this is stopped and left as it was
_DEVICE_CLASS = torch.device  # the real class, read before any session or simulated machine stands in for it


def is_tensor_work(func: Any) -> bool:
    """Whether a torch function call computes with tensors: any but ``torch.device(...)``, which a question's
    answer is built with. One rule for the top level's count (grader/learner/longcalls.py ``PartedProducts``)
    and a re-run's stop (``_NoTensorWork``)."""
    return func is not _DEVICE_CLASS


class TensorWork(BaseException):
    """A statement run again computed with tensors: a demo's (not an Exception: the learner's ``except
    Exception`` lets it through)."""


class _NoTensorWork(LeavesFromUnder, TorchFunctionMode):
    """While a statement runs again, its first torch function call but ``torch.device(...)`` stops it: the
    lesson's speed test under ``if torch.cuda.is_available():`` asked, and on the CPU did no tensor work, but on
    the CUDA stand-in it multiplies two 5000 × 5000 matrices (1.6 s of a notebook's grading, measured)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if is_tensor_work(func):
            raise TensorWork(getattr(func, "__name__", "a torch function"))
        return func(*args, **(kwargs or {}))


def _questions() -> tuple[tuple[Callable[..., Any], ...], tuple[Any, ...]]:
    """The functions of ``QUESTIONS`` this build has (the function inside an lru_cache), and those caches: read
    where PyTorch holds them now, at each top level (a process that cached them once kept a function someone
    had put in their place meanwhile, and heard nothing of PyTorch's own)."""
    functions: list[Callable[..., Any]] = []
    caches: list[Any] = []
    for module_name, names in QUESTIONS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in names:
            func = getattr(module, name, None)
            if hasattr(func, "cache_clear"):
                caches.append(func)
                func = getattr(func, "__wrapped__", None)
            if callable(func):
                functions.append(func)
    return tuple(functions), tuple(caches)


class Asked:
    """For the duration, ``heard`` counts the calls of PyTorch's machine questions (``QUESTIONS``)."""

    def __init__(self) -> None:
        self.heard = 0
        self._listening: contextlib.ExitStack | None = None
        self._caches: tuple[Any, ...] = ()

    def _hear(self) -> None:
        self.heard += 1

    def __enter__(self) -> Asked:
        functions, self._caches = _questions()
        self._listening = contextlib.ExitStack()
        self._listening.enter_context(heard(functions, self._hear))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._listening is not None:
            self._listening.close()
        self.forget()

    def forget(self) -> None:
        """Before each top-level statement: an lru_cache around a question (``torch.backends.mps.is_available``)
        forgets its answer, so that the statement's own question is heard."""
        for cache in self._caches:
            cache.cache_clear()


@dataclass(frozen=True)
class Place:
    """Where a top-level statement stores: a module-level name, or an attribute or a constant key of what a
    module-level name holds (PyTorch's notes: ``args.device = torch.device("cuda")``; ``CONFIG["device"] = ...``)."""

    name: str
    kind: Literal["name", "attr", "item"] = "name"
    key: Any = None


@dataclass(frozen=True)
class MachineStatement:
    """One top-level statement that asked which machine this is: its code, its module's namespace, and where it
    stores there."""

    code: types.CodeType
    namespace: dict[str, Any] = field(repr=False)
    places: tuple[Place, ...] = ()


class _Names(ast.NodeVisitor):
    """Where a top-level statement stores and the names it reads as it runs (``names_of``)."""

    def __init__(self) -> None:
        self.bound: list[Place] = []
        self.read: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.bound.append(Place(node.id))
        else:
            self.read.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            self.bound.append(Place(node.value.id, "attr", node.attr))
            self.read.add(node.value.id)
        else:
            self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        stored = isinstance(node.ctx, ast.Store)
        if stored and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant):
            self.bound.append(Place(node.value.id, "item", node.slice.value))
            self.read.add(node.value.id)
        else:
            self.generic_visit(node)

    def _defined(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A ``def`` binds its name; its decorators and defaults run now, its body when called."""
        self.bound.append(Place(node.name))
        for expr in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if expr is not None:
                self.visit(expr)

    visit_FunctionDef = visit_AsyncFunctionDef = _defined  # noqa: N815

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        """A ``class`` binds its name; its bases, decorators and body run now (its methods' bodies do not)."""
        self.bound.append(Place(node.name))
        inner = _Names()
        for expr in (*node.bases, *node.decorator_list, *node.body):
            inner.visit(expr)
        self.read |= inner.read

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in (*node.args.defaults, *node.args.kw_defaults):
            if expr is not None:
                self.visit(expr)

    def visit_alias(self, node: ast.alias) -> None:
        self.bound.append(Place(node.asname or node.name.split(".")[0]))

    def visit_comprehension(self, node: ast.comprehension) -> None:
        """A comprehension's target is its own (the walrus aside); what it iterates and tests is read."""
        for expr in (node.iter, *node.ifs):
            self.visit(expr)


def names_of(node: ast.stmt) -> tuple[tuple[Place, ...], frozenset[str]]:
    """Where a top-level statement stores (its targets and those of the statements nested in it: an
    ``if``/``elif``/``else``, a ``try``; a ``def``'s or a ``class``'s own name; never a name inside a function or a
    class body), and the names it reads as it runs (not inside a function's body or a lambda's, which run later,
    when called)."""
    names = _Names()
    names.visit(node)
    return tuple(dict.fromkeys(names.bound)), frozenset(names.read)


@contextlib.contextmanager
def asked_again(statements: list[MachineStatement], limit: Callable[[float], contextlib.AbstractContextManager[None]],
                too_slow: type[BaseException]) -> Iterator[None]:
    """Run ``statements`` again, in order, on the machine now in place; what they stored is put back at the end.

    What they print is not shown (the top level showed it once), nor their warnings. One that raises leaves its
    places as they were. One that computes with tensors here (``TensorWork``), or is stopped at
    ``limit(RERUN_LIMIT_S)`` (a cell's alarm, which raises ``too_slow``), too, and it is dropped from
    ``statements``: it is a demo's, and no later session of the process runs it again. (One that turns the alarm
    off itself is stopped with its process at each check's limit, the submission's own wall-clock limit at worst:
    what nine learner functions that each turn it off cost too.) The mode is entered before the alarm is armed
    and left after it is disarmed: no limit lands in its push or pop."""
    saved: list[_Saved] = []
    try:
        for statement in list(statements):
            before = [_save(statement.namespace, place) for place in statement.places]
            saved.extend(before)
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()), _NoTensorWork(), limit(RERUN_LIMIT_S):
                    warnings.simplefilter("ignore")
                    exec(statement.code, statement.namespace)  # noqa: S102 - the learner's own statement, in its process
            except (TensorWork, too_slow):
                _put_back(before)
                statements.remove(statement)
            except BaseException:  # noqa: BLE001 - whatever the statement raises, the machine's checks go on
                _put_back(before)
        yield
    finally:
        _put_back(saved)


_MISSING = object()
_Saved = tuple[dict[str, Any], Place, Any, Any]  # the namespace, the place, what held it there, what it held


def _save(namespace: dict[str, Any], place: Place) -> _Saved:
    if place.kind == "name":
        return namespace, place, None, namespace.get(place.name, _MISSING)
    holder = namespace.get(place.name, _MISSING)
    try:
        value = getattr(holder, place.key, _MISSING) if place.kind == "attr" else holder[place.key]
    except Exception:  # noqa: BLE001 - the learner's object: a missing key, a property that raises
        value = _MISSING
    return namespace, place, holder, value


def _put_back(saved: list[_Saved]) -> None:
    for namespace, place, holder, value in reversed(saved):
        if place.kind == "name":
            if value is _MISSING:
                namespace.pop(place.name, None)
            else:
                namespace[place.name] = value
            continue
        if holder is _MISSING:
            continue
        with contextlib.suppress(Exception):  # the learner's object may refuse: it keeps what the re-run stored
            if place.kind == "attr":
                if value is _MISSING:
                    delattr(holder, place.key)
                else:
                    setattr(holder, place.key, value)
            elif value is _MISSING:
                del holder[place.key]
            else:
                holder[place.key] = value
