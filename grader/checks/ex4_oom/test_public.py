"""Exercise 4, public check: fill_until_oom catches the OOM and counts the chunks."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.budget import CHUNK_MB, MiB, fill_accelerator, run_fill
from grader.checks.support.devices import Accelerator
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail


def test_fill_until_oom_returns_count(ex4: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with fill_accelerator(accel) as acc:
        expected = acc.fill_capacity(CHUNK_MB * MiB)  # CHUNKS_THAT_FIT on the stand-in
        count, _ = run_fill(ex4, acc)
    if not isinstance(count, int) or isinstance(count, bool):
        fail("ex4.count_not_int", got=type(count).__name__)
    if not expected - 1 <= count <= expected:
        fail("ex4.wrong_count", got=count, expected=expected, chunk_mb=CHUNK_MB)
