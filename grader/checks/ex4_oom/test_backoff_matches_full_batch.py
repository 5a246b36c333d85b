"""ex4.backoff_matches_full_batch: out of memory at the full batch, the step halves the micro-batch
and accumulates gradients equal to the full batch's — with an uneven last micro-batch (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.workload import BATCH, budget_forcing_backoff, halvings, same_as_full_batch, step
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại snippet gradient accumulation, và nghĩ về micro-batch cuối nhỏ hơn.",
    "en": "Reread the gradient accumulation snippet, and think of a smaller last micro-batch.",
}
MESSAGES = {
    "ex4.micro_not_reduced": {
        "vi": "Cả batch {batch} không vừa bộ nhớ, nhưng micro-batch trả về là {got}: chia đôi sau mỗi lần OOM.",
        "en": "The full batch of {batch} does not fit, yet the returned micro-batch size is {got}: halve it after "
              "each OOM.",
    },
    "ex4.micro_not_halved": {
        "vi": "Micro-batch trả về là {got}, không phải kết quả của việc chia đôi {batch} (vd {halves}): đề bài yêu "
              "cầu chia đôi sau mỗi lần OOM.",
        "en": "The returned micro-batch size {got} is not what halving {batch} gives (e.g. {halves}): the exercise "
              "asks to halve it after each OOM.",
    },
}


def test_backoff_matches_full_batch(ex4: LearnerModule, devices: Callable[..., list[Device]],
                                    draw: Draw) -> None:
    budget = budget_forcing_backoff()
    for dev in devices("cpu", "cuda"):
        with dev:
            loss, micro, state = step(ex4, dev, budget, draw.ex4_seed)
        if not isinstance(micro, int) or not 1 <= micro < BATCH:
            fail("ex4.micro_not_reduced", device=dev.label, got=micro, batch=BATCH)
        if micro not in halvings(BATCH):
            fail("ex4.micro_not_halved", device=dev.label, got=micro, batch=BATCH,
                 halves=", ".join(map(str, sorted(halvings(BATCH), reverse=True)[:4])))
        same_as_full_batch(dev, state, loss, draw.ex4_seed)
