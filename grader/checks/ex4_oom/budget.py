"""The memory budget that makes fill_until_oom end quickly, on the stand-in or a real GPU."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.support.devices import Accelerator
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import LearnerRaised, fail

CHUNK_MB = 4
CHUNKS_THAT_FIT = 8
MiB = 1024 * 1024


# 8.5 chunks: the 9th allocation fails on the stand-in. Under a real GPU's memory cap the
# caching allocator reserves whole segments, so there the count is measured (fill_capacity).
FILL_BUDGET = int((CHUNKS_THAT_FIT + 0.5) * CHUNK_MB * MiB)


def _typed_oom(mode: str) -> bool:
    # MPS reports running out of memory as a plain RuntimeError, not torch.OutOfMemoryError:
    # the lesson's `except torch.cuda.OutOfMemoryError` would not catch it, so on a Mac these
    # checks grade on the stand-in.
    return mode != "mps"


def fill_accelerator(accel: Callable[..., Accelerator]) -> Accelerator:
    """The device fill_until_oom is graded on, under FILL_BUDGET."""
    return accel(budget_bytes=FILL_BUDGET, real_ok=_typed_oom)


def is_oom(raised: LearnerRaised) -> bool:
    """The learner's code let an out-of-memory error escape."""
    return "OutOfMemoryError" in raised.exc_text or "out of memory" in raised.exc_text


def run_fill(ex4: LearnerModule, acc: Accelerator) -> tuple[object, int]:
    """Call fill_until_oom; return its result and the live bytes once it returned."""
    baseline = acc.live_bytes()
    try:
        count = ex4.fill_until_oom(acc.device, chunk_mb=CHUNK_MB)
    except LearnerRaised as raised:
        if is_oom(raised):
            fail("ex4.oom_not_caught", error=raised.exc_text[:160])
        raise
    return count, acc.live_bytes() - baseline
