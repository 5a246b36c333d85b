"""Swap a library function for the grader's own — in the library and wherever the learner holds it.

``from time import perf_counter`` or ``from torch.cuda import synchronize`` binds the original
function into the learner's module when it is imported, before any check runs. Setting the
attribute on ``time`` or ``torch.cuda`` alone would leave those names on the real function: a
correct submission written that way would be timed on the wrong clock, or call the real
``torch.cuda.synchronize`` on a CPU-only machine and crash. So every patch is also applied to
the module-level names of the learner's modules (their files, and any helper module of a
folder submission) that hold the very object being replaced, and undone with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from grader.checks.support.learner import learner_namespaces

Target = tuple[object, str]  # (owner, attribute): (time, "perf_counter")


def _bindings(originals: Mapping[int, object]) -> Iterator[tuple[dict[str, Any], str, object]]:
    """(namespace, name, original) for each learner global that is one of ``originals``."""
    for namespace in learner_namespaces():
        for name, value in list(namespace.items()):
            if id(value) in originals and originals[id(value)] is value:
                yield namespace, name, value


@contextlib.contextmanager
def patched(replacements: Mapping[Target, object]) -> Iterator[None]:
    """Replace each ``owner.attr`` by its value for the duration, learner-held names included."""
    saved: list[tuple[object, str, object]] = []
    rebound: list[tuple[dict[str, Any], str, object, object]] = []
    try:
        originals: dict[int, object] = {}
        news: dict[int, object] = {}
        for (owner, attr), value in replacements.items():
            original = getattr(owner, attr)
            saved.append((owner, attr, original))
            setattr(owner, attr, value)
            originals[id(original)] = original
            news.setdefault(id(original), value)  # timeit.default_timer *is* time.perf_counter: first wins
        for namespace, name, original in _bindings(originals):
            namespace[name] = news[id(original)]
            rebound.append((namespace, name, original, namespace[name]))
        yield
    finally:
        for namespace, name, original, value in reversed(rebound):
            if namespace.get(name) is value:  # the learner's code may have rebound it since
                namespace[name] = original
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


def monkeypatch_everywhere(monkeypatch: pytest.MonkeyPatch, owner: object, attr: str, value: object) -> None:
    """``monkeypatch.setattr`` that also reaches the learner's ``from owner import attr`` names."""
    original = getattr(owner, attr)
    monkeypatch.setattr(owner, attr, value)
    for namespace, name, _ in _bindings({id(original): original}):
        monkeypatch.setitem(namespace, name, value)
