"""``torch._dynamo`` in the learner process: imported when the learner's code compiles, not before.

The first ``Optimizer.step()`` or ``zero_grad()`` of a process imports ``torch._dynamo`` (with sympy:
~850 modules, 2.2 s of CPU on the 2-core machine, more than ``import torch`` itself) for two calls
that do nothing unless a frame is being compiled (torch/optim/optimizer.py
``_use_grad_for_differentiable``: ``torch._dynamo.graph_break()``; torch/_compile.py
``_disable_dynamo``: ``torch._dynamo.disable(fn, recursive, wrapping=False)``). No frame can be
compiled before ``torch._dynamo`` exists, so until then both are what they do in eager PyTorch:
``graph_break`` nothing, a disabled function its own call. ``defer_dynamo()`` puts a module in
``sys.modules["torch._dynamo"]`` that answers those two itself and imports the real one, into that
same module object, at any other use: ``torch.compile``, ``import torch._dynamo.config``,
``torch._dynamo.disable(fn)`` as a learner writes it, ``dir()``. From then on it is PyTorch's
module, and the functions disabled before it forget the eager wrapper (``_disable_dynamo``
makes PyTorch's at their next call): the same graphs and graph breaks as in a process that
imported it at its first step (tests/test_deferred.py).

Measured (2026-12-03, this module's tests): a grading's learner process imports ~1130 modules
instead of ~1950, and ``grader grade solutions`` no longer waits for the import.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import torch

NAME = "torch._dynamo"


class _Deferred(types.ModuleType):
    """``torch._dynamo`` before anything but an eager optimizer used it."""

    def __getattr__(self, attr: str) -> Any:  # only for what the module's dict lacks
        return getattr(_load(self), attr)

    def __dir__(self) -> list[str]:
        return dir(_load(self))


class _Loader:
    """What the deferred module needs to become the real one, once."""

    def __init__(self, path: list[str]) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.loading = False
        self.disabled: list[Callable[..., Any]] = []  # functions holding an eager ``__dynamo_disable``

    def reset_after_fork(self) -> None:
        self.lock = threading.RLock()  # a thread that held it does not exist in the child
        self.loading = False


def _loader_of(module: types.ModuleType) -> _Loader:
    loader = vars(module)[_STATE]
    assert isinstance(loader, _Loader)
    return loader


_STATE = "__deferred__"  # the deferred module's own _Loader, in its dict until it is loaded


def graph_break(msg: str = "") -> None:
    """Force a graph break (torch._dynamo.decorators.graph_break: nothing outside a compiled frame)."""


def disable(fn: Callable[..., Any] | None = None, recursive: bool = True, *, reason: str | None = None,
            wrapping: bool = True) -> Any:
    """``torch._dynamo.disable``. Eager only as torch/_compile.py ``_disable_dynamo`` calls it (a
    function, ``wrapping=False``, no reason); any other call is the learner's own use of Dynamo."""
    module = sys.modules[NAME]
    if fn is None or wrapping or reason is not None or not isinstance(module, _Deferred):
        return _load(module).disable(fn, recursive, reason=reason, wrapping=wrapping)
    target = fn

    def eager(*args: Any, **kwargs: Any) -> Any:
        current = sys.modules.get(NAME)
        if isinstance(current, _Deferred) or current is None:
            return target(*args, **kwargs)
        real = current.disable(target, recursive, wrapping=False)
        target.__dynamo_disable = real  # type: ignore[attr-defined]  # what _disable_dynamo caches
        return real(*args, **kwargs)

    _loader_of(module).disabled.append(target)
    return eager


def _load(module: types.ModuleType) -> Any:
    """Execute torch/_dynamo/__init__.py into ``module``, as the import system would have.

    A learner's time limit (SIGALRM, grader/learner/toplevel.py) waits while the module's code runs
    (an importlib frame is on the stack, as in any import); one that lands before or after it leaves
    a state the next use finishes: the code is executed once (its ``eval_frame`` submodule says it
    was), and a disabled function whose eager wrapper was not dropped makes PyTorch's at its next call."""
    loader = _loader_of(module) if isinstance(module, _Deferred) else None
    if loader is None:
        return module
    with loader.lock:
        if not isinstance(module, _Deferred):
            return module  # another thread loaded it while this one waited
        if loader.loading:
            raise AttributeError  # this thread is inside the import: a partly initialized module
        namespace = vars(module)
        if "eval_frame" not in namespace:  # not executed yet
            _execute(module, loader)
        module.__class__ = types.ModuleType  # type: ignore[assignment]  # PyTorch's module from now on
        namespace.pop(_STATE, None)
        for fn in loader.disabled:
            vars(fn).pop("__dynamo_disable", None)
        loader.disabled.clear()
    return module


def _execute(module: types.ModuleType, loader: _Loader) -> None:
    spec = module.__spec__
    assert spec is not None and spec.loader is not None
    namespace = vars(module)
    for name in ("graph_break", "disable"):
        namespace.pop(name, None)
    namespace["__path__"] = loader.path
    loader.loading = True
    spec._initializing = True  # type: ignore[attr-defined]  # as importlib._bootstrap marks it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(NAME, None)  # as a failed import: the next import starts afresh
        vars(torch).pop("_dynamo", None)
        raise
    finally:
        spec._initializing = False  # type: ignore[attr-defined]
        loader.loading = False


def defer_dynamo() -> None:
    """Put the deferred ``torch._dynamo`` in place, unless it is imported (or deferred) already."""
    if NAME in sys.modules:
        return
    spec = importlib.util.find_spec(NAME)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader = _Loader(vars(module).pop("__path__"))  # submodule imports go through _load
    os.register_at_fork(after_in_child=loader.reset_after_fork)
    vars(module)[_STATE] = loader
    module.graph_break = graph_break  # type: ignore[attr-defined]
    module.disable = disable  # type: ignore[attr-defined]
    module.__class__ = _Deferred
    sys.modules[NAME] = module
    torch._dynamo = module
