"""Swap a library function for the grader's own — wherever the learner's code holds it.

A correct submission may hold a library function in many ways before any check runs:
``from time import perf_counter``, ``from torch.cuda import synchronize``, a dispatch table
``SYNC = {"cuda": torch.cuda.synchronize, "mps": torch.mps.synchronize}`` (transformers'
testing_utils), ``functools.partial(torch.cuda.synchronize)``, a default argument. Setting the
attribute on ``torch.cuda`` alone would leave all of those on the real function: a correct
submission would be timed on the wrong clock, or call the real ``torch.cuda.synchronize`` on a
CPU-only machine and crash. So:

- a replaced function written in Python (``torch.cuda.synchronize``, ``torch.mps.empty_cache``,
  ``torch.cuda.is_available`` …) is *redirected*: its own code object becomes a call of the
  replacement, so every reference to it, wherever it is held, reaches the replacement;
- a replaced builtin (``time.perf_counter``) cannot be redirected: the module-level names of the
  learner's modules that hold it are rebound instead;
and all of it is undone afterwards. A replacement that needs the original (a recorder that wraps
it) says so with ``Wrap``: it is handed a working copy of the original, never the redirected one.

Which modules are the learner's is the caller's to say (``LearnerCode``): the learner process's
runner knows it once the learner's top level ran, and hands it to every session it opens.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Target = tuple[object, str]  # (owner, attribute): (time, "perf_counter")


@dataclass
class _ModuleScan:
    """The last scan of sys.modules: its key (how many modules, the one imported last) and the
    names of the learner's modules it found."""

    key: tuple[int, str | None] | None = None
    names: tuple[str, ...] = ()


@functools.cache
def preloaded_modules() -> Mapping[int, object]:
    """The modules this process holds before any learner code runs, by id (and held, so that no id is
    reused): none of them is the learner's, and a scan for the learner's modules skips them unread. Asked
    by the learner process before its top level runs, and first by its fork server before it forks: a
    forked child's first scan read each of ~1300 modules' ``__file__`` (10 ms a child, most of it the
    kernel copying the pages it touched)."""
    return types.MappingProxyType({id(module): module for module in list(sys.modules.values())})


@dataclass(frozen=True)
class LearnerCode:
    """Where the learner's modules live (its work dir, a folder's helper modules, in both
    spellings: sys.path holds the resolved cwd). Empty before the learner's top level ran.
    ``before``: the modules there before it ran (``preloaded_modules``), never the learner's."""

    dirs: tuple[str, ...] = ()
    before: Mapping[int, object] = field(default_factory=dict, compare=False, repr=False)
    _scan: _ModuleScan = field(default_factory=_ModuleScan, compare=False, repr=False)

    def namespaces(self) -> list[dict[str, Any]]:
        """The globals of every imported module whose file is in the learner's dirs.

        Asked at every device session and check (patching, cleared caches), and sys.modules holds
        ~3000 modules once torch._dynamo is in: scanning them all each time was 1.6 CPU-s of a
        batch learner's 8 (py-spy, 2026-12-02). The scan is redone only when a module was added or
        removed since the last one (sys.modules keeps insertion order: its length, or the name
        imported last, changed); the modules it found are looked up again each time, so one
        replaced under its name is seen as it is now."""
        if not self.dirs:
            return []
        key = (len(sys.modules), next(reversed(sys.modules), None))
        if self._scan.key != key:
            before = self.before
            self._scan.names = tuple(name for name, module in list(sys.modules.items())
                                     if id(module) not in before and self._holds(module))
            self._scan.key = key
        found = (sys.modules.get(name) for name in self._scan.names)
        return [vars(module) for module in found if module is not None and self._holds(module)]

    def _holds(self, module: object) -> bool:
        filename = getattr(module, "__file__", None)
        return isinstance(filename, str) and filename.startswith(self.dirs)


NO_LEARNER_CODE = LearnerCode()  # what a stand-in patches with before (or without) any learner code


@dataclass(frozen=True)
class Wrap:
    """A replacement built around the original: ``make(original) -> replacement``."""

    make: Callable[[Callable[..., Any]], Callable[..., Any]]


_MISSING = object()


class Injected:
    """Attributes set for a duration and put back (deleted where they did not exist)."""

    def __init__(self) -> None:
        self._saved: list[tuple[object, str, object]] = []

    def set(self, owner: object, name: str, value: object) -> None:
        # A class's own attribute, not one it inherits: undo deletes what only shadowed a base's.
        old = vars(owner).get(name, _MISSING) if isinstance(owner, type) else getattr(owner, name, _MISSING)
        self._saved.append((owner, name, old))
        setattr(owner, name, value)

    def set_all(self, module: types.ModuleType, values: Mapping[str, object]) -> None:
        """``set`` for each of ``module``'s attributes in ``values``, its namespace updated in one call (a
        CUDA stand-in's session sets ~80 of torch._C's: a tenth of a session's start, one by one)."""
        namespace = vars(module)
        self._saved.extend((module, name, namespace.get(name, _MISSING)) for name in values)
        namespace.update(values)

    def undo(self) -> None:
        for owner, name, old in reversed(self._saved):
            if old is _MISSING:
                try:  # (not contextlib.suppress: ~40 a CUDA stand-in session, a context manager each)
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, old)
        self._saved.clear()


class _StandingFor(type):
    """The metaclass of every ``standing_for`` class: one, shared. (A metaclass made for each session
    took 0.5 ms to build, three a CUDA stand-in session: most of a session's start.)"""

    _real: type
    _kinds: tuple[type, ...]
    _make: Callable[..., Any]

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, cls._kinds)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls._kinds)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls._real, name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._make(*args, **kwargs)


def standing_for(real: type, make: Callable[..., Any], also: tuple[type, ...] = ()) -> type:
    """A class to put in place of the library class ``real`` for a session (``torch.device``,
    ``torch.Generator``, ``torch.Stream``): calling it calls ``make``, which returns ``real``'s objects
    (or its subclasses', or those of the classes ``also`` names: what stands for ``real``'s subclasses
    on the device); ``isinstance`` and ``issubclass`` answer for all of them, and ``real``'s own class
    attributes (``torch.Generator.manual_seed``, unbound) are read through it."""
    return _StandingFor(real.__name__, (), {"__module__": real.__module__, "__qualname__": real.__qualname__,
                                            "_real": real, "_kinds": (real, *also), "_make": staticmethod(make)})


_TRAMPOLINE = "def trampoline(*args, **kwargs):\n    return {name}(*args, **kwargs)\n"


def _copy(func: types.FunctionType) -> types.FunctionType:
    """The function as it is now, as a separate object: a later redirect of ``func`` leaves it alone."""
    clone = types.FunctionType(func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__)
    clone.__kwdefaults__ = func.__kwdefaults__
    clone.__dict__.update(func.__dict__)
    return clone


def _redirectable(obj: object) -> bool:
    return isinstance(obj, types.FunctionType) and not obj.__code__.co_freevars


def kept_original(func: Callable[..., Any]) -> Callable[..., Any]:
    """A reference to ``func`` that keeps calling the original while it is patched (what a grader's
    own recorder reads the allocator or the clock with)."""
    return _copy(func) if _redirectable(func) else func  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1024)
def _trampoline(name: str) -> types.CodeType:
    """The code of a function that calls the global ``name`` (the same for every function redirected to
    it: a code object is immutable). Made once a name: compiling it was a tenth of a CPU session's start."""
    namespace: dict[str, Any] = {}
    exec(_TRAMPOLINE.format(name=name), namespace)  # noqa: S102 - a fixed, one-line trampoline
    return namespace["trampoline"].__code__  # type: ignore[no-any-return]


class _Redirect:
    """``func``'s own code object made a call of ``to``; ``undo()`` puts it back."""

    def __init__(self, func: types.FunctionType, to: object) -> None:
        self.func = func
        self.name = f"__grader_redirect_{id(func)}__"
        self.saved = (func.__code__, func.__defaults__, func.__kwdefaults__)
        func.__globals__[self.name] = to
        func.__code__ = _trampoline(self.name)
        func.__defaults__ = None
        func.__kwdefaults__ = None

    def undo(self) -> None:
        self.func.__code__, self.func.__defaults__, self.func.__kwdefaults__ = self.saved
        self.func.__globals__.pop(self.name, None)


@contextlib.contextmanager
def heard(functions: Iterable[Callable[..., Any]], hear: Callable[[], None]) -> Iterator[None]:
    """Each of ``functions`` (Python functions; others are left alone) calls ``hear()`` first, for the duration,
    wherever it is held: its code object is redirected (``_Redirect``) to a working copy of itself that hears
    first. Nothing is set on its module, so a name bound meanwhile (``from torch.cuda import is_available``)
    holds the function object itself, which a session's ``patched`` finds later."""
    redirects: list[_Redirect] = []
    try:
        for func in functions:
            if _redirectable(func) and all(r.func is not func for r in redirects):
                redirects.append(_Redirect(func, _hearing(_copy(func), hear)))  # type: ignore[arg-type]
        yield
    finally:
        for redirect in reversed(redirects):
            redirect.undo()


def _hearing(original: Callable[..., Any], hear: Callable[[], None]) -> Callable[..., Any]:
    def hearing(*args: Any, **kwargs: Any) -> Any:
        hear()
        return original(*args, **kwargs)

    return hearing


def _resolve(replacements: Mapping[Target, object]) -> dict[Target, object]:
    """``Wrap`` replacements built around a working copy of the original."""
    resolved = {}
    for (owner, attr), value in replacements.items():
        resolved[(owner, attr)] = value.make(kept_original(getattr(owner, attr))) if isinstance(value, Wrap) else value
    return resolved


def _learner_bindings(replacements: Mapping[Target, object],
                      code: LearnerCode) -> list[tuple[dict[str, Any], str, object, object]]:
    """(namespace, name, original, replacement) for each learner global holding a replaced object.

    Read before anything is replaced. One scan of the learner's modules for all replacements.
    """
    by_id: dict[int, tuple[object, object]] = {}
    for (owner, attr), value in replacements.items():
        original = getattr(owner, attr)
        by_id.setdefault(id(original), (original, value))  # timeit.default_timer *is* time.perf_counter
    found = []
    for namespace in code.namespaces():
        for name, held in list(namespace.items()):
            original, value = by_id.get(id(held), (None, None))
            if original is not None and held is original:
                found.append((namespace, name, original, value))
    return found


@contextlib.contextmanager
def patched(replacements: Mapping[Target, object], code: LearnerCode) -> Iterator[None]:
    """Replace each ``owner.attr`` by its value for the duration, wherever ``code``'s modules hold it."""
    resolved = _resolve(replacements)
    rebound = _learner_bindings(resolved, code)
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr in resolved]
    redirects: list[_Redirect] = []
    try:
        for (owner, attr), value in resolved.items():
            original = getattr(owner, attr)
            if _redirectable(original) and original is not value and all(r.func is not original for r in redirects):
                redirects.append(_Redirect(original, value))
            setattr(owner, attr, value)
        for namespace, name, _, value in rebound:
            namespace[name] = value
        yield
    finally:
        for namespace, name, original, value in reversed(rebound):
            if namespace.get(name) is value:  # the learner's code may have rebound it since
                namespace[name] = original
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)
        for redirect in reversed(redirects):
            redirect.undo()
