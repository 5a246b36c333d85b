"""Calling the learner's functions, in the learner process: guarded, timed, located.

A call that raises is reported with the learner's own line ("bai.ipynb, In [8], line 2"); a
missing function or one that still raises NotImplementedError is "not attempted"; a call past
its deadline is interrupted (SIGALRM) and its function remembered, so a later check that needs
it is charged at once instead of waiting again — also when the check calls another function that
calls it (``speedup`` calling a ``time_matmul`` that hung: one wait, not two). Nothing here decides
a verdict: it reports.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from grader.emulation.patching import LearnerCode
from grader.learner.toplevel import TimeUp, TopLevel, Uncut, files_before, files_full
from grader.wire.codec import cut
from grader.wire.messages import RaisedKind, Source


def clear_learner_caches(code: LearnerCode) -> None:
    """functools caches in the learner's modules forget what they cached (an lru_cache'd
    ``is_torch_cuda_available()``, as transformers and Lightning write them): each check, and each
    machine ex1 simulates, is asked afresh. A module the learner imported (``torch``, ``np``) is no cache:
    asked for ``cache_clear``, torch's and numpy's module ``__getattr__`` ran and raised, for each module of
    each namespace at each check (~0.2 ms a check)."""
    for namespace in code.namespaces():
        for value in list(namespace.values()):
            if isinstance(value, types.ModuleType):
                continue
            members = list(vars(value).values()) if isinstance(value, type) else []
            for obj in (value, *members):
                func = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
                clear = getattr(func, "cache_clear", None)
                if callable(clear) and hasattr(func, "cache_info"):
                    clear()


def learner_location(exc: BaseException, source: Source, filename: str) -> str:
    """The deepest frame of the traceback that is in the learner's file."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == filename and frame.lineno:
            line = frame.lineno
    return source.where(line) if line else source.origin


@dataclass(frozen=True)
class Outcome:
    """How one call ended: ``value`` when it returned, else ``kind`` and the text."""

    returned: bool
    value: Any = None
    kind: RaisedKind = "learner_raised"  # when it did not return
    text: str = ""
    where: str = ""
    hung: str = ""  # already_timed_out: the function that ran past its limit earlier, when not the one called
    handling: str = ""  # learner_raised while an earlier exception was being handled (its __context__)
    files_full: bool = False  # learner_raised when the learner's files had reached the size limit (``files_full``)


class ReachedHung(BaseException):
    """A call reached a learner function that ran past a check's limit earlier in this process (not
    an Exception: `except Exception` in the learner's code lets it through, as it does TimeUp)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def hung_codes(toplevel: TopLevel) -> dict[types.CodeType, str]:
    """The code of each learner function that ran past a limit, unwrapped from its decorators, and
    only when it is the learner's own (a decorator's wrapper code is shared by every function it
    wraps). Read from modules already run: looking never runs a top level."""
    codes: dict[types.CodeType, str] = {}
    mine = {toplevel.filename(s) for s in toplevel.sources.values()}
    for key in toplevel.timed_out:
        module_name, _, name = key.rpartition(".")
        module = sys.modules.get(module_name)
        func = getattr(module, name, None) if module is not None and module_name in toplevel.sources else None
        if not callable(func):
            continue
        with contextlib.suppress(Exception):  # a learner's object whose __wrapped__ chain misbehaves
            code = getattr(inspect.unwrap(func), "__code__", None)
            if isinstance(code, types.CodeType) and code.co_filename in mine:
                codes[code] = key
    return codes


@contextlib.contextmanager
def refusing(codes: dict[types.CodeType, str]) -> Iterator[None]:
    """While the learner's function runs, a call of any of ``codes`` raises ReachedHung at once (a
    profile hook, set only when there are such functions; Python unsets it when the hook raises)."""
    if not codes:
        yield
        return

    def hook(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            raise ReachedHung(codes[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(previous)


def lookup(toplevel: TopLevel, source: Source, name: str) -> Any:
    """A name of the learner's module, or None when it is not there."""
    module = toplevel.module(source.module)
    return getattr(module, name, None) if not name.startswith("_") else None


def call(toplevel: TopLevel, source: Source, name: str, invoke: Callable[[Any], Any],
         deadline_s: float) -> Outcome:
    """Run ``invoke(function)`` for the learner's ``name``: it must exist and be callable."""
    key = f"{source.module}.{name}"
    if key in toplevel.timed_out:
        return Outcome(False, kind="already_timed_out")
    func = lookup(toplevel, source, name)
    if func is None or not callable(func):
        return Outcome(False, kind="not_attempted")
    before = files_before(toplevel.workdir)
    try:
        with toplevel.alarm(deadline_s), Uncut(refusing(hung_codes(toplevel))):
            return Outcome(True, invoke(func))
    except ReachedHung as reached:
        return Outcome(False, kind="already_timed_out", hung=reached.key)
    except TimeUp:
        toplevel.timed_out.add(key)
        return Outcome(False, kind="timed_out")
    except NotImplementedError:
        return Outcome(False, kind="not_attempted")
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt too: the learner's code never ends grading
        context = exc.__context__
        return Outcome(False, kind="learner_raised", text=described(exc, 300),
                       where=learner_location(exc, source, toplevel.filename(source)),
                       handling=described(context, 120) if context is not None else "",
                       files_full=files_full(toplevel.workdir, before))


def described(exc: BaseException, limit: int) -> str:
    """A learner's exception as "Type: message"; its type alone when the message cannot be read (a
    ``__str__`` that raises was once reported as the grader's own failure, "tell the instructor")."""
    try:
        message = cut(str(exc).strip(), limit)
    except Exception:  # noqa: BLE001 - the learner's __str__, whatever it raises
        return f"{type(exc).__name__} (its message could not be read)"
    return f"{type(exc).__name__}: {message}"
