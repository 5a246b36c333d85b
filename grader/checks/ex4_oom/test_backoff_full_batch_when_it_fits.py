"""ex4.backoff_full_batch_when_it_fits: with memory enough, one step on the whole batch (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.workload import BATCH, same_as_full_batch, step
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại \"Cách giải quyết\": chỉ giảm batch khi cần.",
    "en": "Reread \"Cách giải quyết\": reduce the batch only when needed.",
}
MESSAGES = {
    "ex4.shrinks_without_oom": {
        "vi": "Bộ nhớ đủ cho cả batch, nhưng micro-batch trả về là {got} (batch {batch}): chỉ giảm sau khi OOM.",
        "en": "Memory was enough for the whole batch, yet the micro-batch size returned is {got} (batch {batch}): "
              "only shrink after an OOM.",
    },
}


def test_backoff_full_batch_when_it_fits(ex4: LearnerModule, devices: Callable[..., list[Device]],
                                         draw: Draw) -> None:
    for dev in devices("cpu", "cuda"):
        with dev:
            loss, micro, state = step(ex4, dev, None, draw.ex4_seed)
        if micro != BATCH:
            fail("ex4.shrinks_without_oom", device=dev.label, got=micro, batch=BATCH)
        same_as_full_batch(dev, state, loss, draw.ex4_seed)
