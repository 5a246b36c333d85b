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


def _learner_bindings(replacements: Mapping[Target, object]) -> list[tuple[dict[str, Any], str, object, object]]:
    """(namespace, name, original, replacement) for each learner global holding a replaced object.

    Read before anything is replaced. One scan of the learner's modules for all replacements.
    """
    by_id: dict[int, tuple[object, object]] = {}
    for (owner, attr), value in replacements.items():
        original = getattr(owner, attr)
        by_id.setdefault(id(original), (original, value))  # timeit.default_timer *is* time.perf_counter
    found = []
    for namespace in learner_namespaces():
        for name, held in list(namespace.items()):
            original, value = by_id.get(id(held), (None, None))
            if original is not None and held is original:
                found.append((namespace, name, original, value))
    return found


@contextlib.contextmanager
def patched(replacements: Mapping[Target, object]) -> Iterator[None]:
    """Replace each ``owner.attr`` by its value for the duration, learner-held names included."""
    rebound = _learner_bindings(replacements)
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr in replacements]
    try:
        for (owner, attr), value in replacements.items():
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


def monkeypatch_everywhere(monkeypatch: pytest.MonkeyPatch, replacements: Mapping[Target, object]) -> None:
    """``monkeypatch.setattr`` for each ``owner.attr`` that also reaches the learner's
    ``from owner import attr`` names; undone when the check ends."""
    for namespace, name, _, value in _learner_bindings(replacements):
        monkeypatch.setitem(namespace, name, value)
    for (owner, attr), value in replacements.items():
        monkeypatch.setattr(owner, attr, value)
