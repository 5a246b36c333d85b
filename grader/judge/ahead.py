"""What every grading's checks compute alike, computed once by a judge server before it forks.

A check helper whose value depends on no draw — only on the course's fixed problems, as the memory
budget that makes ex4's back-off halve twice depends only on the problem's shapes — is declared with
``@same_for_every_grading``: cached for the process, and computed by the judge's fork server
(grader/spawn/forkserver.py) before its first fork, so that every forked judge of a class finds it
computed instead of computing it again. An exec'd judge (``grader grade``) computes it at first use.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TypeVar

import torch

T = TypeVar("T")
MARK = "same_for_every_grading"


def same_for_every_grading(func: Callable[[], T]) -> Callable[[], T]:
    """``func``'s value, computed once a process (and ahead by a judge server: ``compute_ahead``)."""
    cached = functools.cache(func)
    setattr(cached, MARK, True)
    return cached


def compute_ahead(modules: Iterable[ModuleType]) -> None:
    """Compute every ``same_for_every_grading`` value the ``modules`` hold, on one thread: a server
    that ran torch's OpenMP on several threads before forking leaves its children waiting for threads
    they do not have (a forked child's next parallel matmul hung: tests/test_launch.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for module in modules:
            for value in list(vars(module).values()):
                if getattr(value, MARK, False) is True and callable(value):
                    value()
    finally:
        torch.set_num_threads(threads)
