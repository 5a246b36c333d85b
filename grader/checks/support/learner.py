"""The learner's module as checks see it: its top level run once, every call guarded.

A call to a learner function that raises becomes LearnerRaised (with the learner's line),
a missing function or NotImplementedError becomes NotAttempted, so a check body reads
like the exercise: ``y = ex3.roundtrip(x, device)``. The module itself is run by
grader/toplevel.py, cell by cell, before the first check: it never fails as a whole.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

from grader.checks.support.outcomes import AlreadyTimedOut, LearnerRaised, NotAttempted
from grader.submission import SourceFile
from grader.toplevel import TopLevel

# pytest-timeout's Failed and pytest's own outcomes must pass through untouched.
_PASS_THROUGH: tuple[type[BaseException], ...] = (GeneratorExit,)
try:
    from _pytest.outcomes import OutcomeException

    _PASS_THROUGH = (*_PASS_THROUGH, OutcomeException)
except ImportError:  # pragma: no cover - pytest is always there in the child
    pass


def learner_location(exc: BaseException, source: SourceFile, filename: str) -> str:
    """The deepest frame of the traceback that is in the learner's file."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == filename and frame.lineno:
            line = frame.lineno
    return source.where(line) if line else source.origin


_LEARNER_DIRS: set[str] = set()  # where the learner's modules (and a folder's helpers) live


def learner_namespaces() -> list[dict[str, Any]]:
    """The globals of every imported module whose file is in the learner's work dir."""
    namespaces = []
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if isinstance(filename, str) and filename.startswith(tuple(_LEARNER_DIRS)):
            namespaces.append(vars(module))
    return namespaces


def clear_learner_caches() -> None:
    """functools caches in the learner's modules forget what they cached (an lru_cache'd
    ``is_torch_cuda_available()``, as transformers and Lightning write them): each check, and each
    machine ex1 simulates, is asked afresh."""
    for namespace in learner_namespaces():
        for value in list(namespace.values()):
            members = list(vars(value).values()) if isinstance(value, type) else []
            for obj in (value, *members):
                func = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
                clear = getattr(func, "cache_clear", None)
                if callable(clear) and hasattr(func, "cache_info"):
                    clear()


class LearnerModule:
    def __init__(self, source: SourceFile, toplevel: TopLevel) -> None:
        self._source = source
        self._toplevel = toplevel
        _LEARNER_DIRS.update(toplevel.learner_dirs())

    @property
    def source(self) -> SourceFile:
        return self._source

    def load(self) -> ModuleType:
        """The module, its top level run (once per process)."""
        return self._toplevel.module(self._source.module)

    def value(self, name: str) -> Any:
        module = self.load()
        if not hasattr(module, name):
            raise NotAttempted(name)
        return getattr(module, name)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        func = self.value(name)
        if not callable(func):
            raise NotAttempted(name)
        return self._guard(name, func)

    def _guard(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        source = self._source
        toplevel = self._toplevel
        filename = toplevel.filename(source)
        key = f"{source.module}.{name}"

        def call(*args: Any, **kwargs: Any) -> Any:
            # A function that ran past one check's limit costs the next checks no more waiting.
            if key in toplevel.timed_out:
                raise AlreadyTimedOut(name)
            toplevel.listener("calling", {"function": key})
            try:
                return func(*args, **kwargs)
            except NotImplementedError:
                raise NotAttempted(name) from None
            except _PASS_THROUGH as exc:
                if str(exc).startswith("Timeout"):  # pytest-timeout stopped it
                    toplevel.timed_out.add(key)
                raise
            except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt too: learner code must not end grading
                raise LearnerRaised(exc, learner_location(exc, source, filename), name) from None

        return call
