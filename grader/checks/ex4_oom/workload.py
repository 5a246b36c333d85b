"""The training step ex4's back-off checks use, the grader's own reference for it, and the
messages its checks share.

The batch (602) halves to 301, then 150 (or 151, halving up): at micro-batch 150 it splits into
four of 150 and one of 2, so a back-off that divides each loss by the number of micro-batches
instead of weighting it by its size no longer matches the full batch.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import torch

from grader.checks.ex4_oom.budget import is_oom, names_oom
from grader.judge.api import (
    Device,
    LearnerModule,
    LearnerRaised,
    allclose,
    cut,
    fail,
    is_number,
    same_for_every_grading,
)
from grader.reference.meter import MemoryMeter
from grader.reference.problems import EX4_BATCH, EX4_SEED, ex4_problem, ex4_reference_step

BATCH = EX4_BATCH
# How far the weights a back-off step leaves may be from the full-batch reference's: float32's rounding
# of another device, another micro-batch and another order of the sums, nothing more (the drawn problem
# keeps ReLU's inputs clear of its kink: grader/reference/problems.py KINK_MARGIN).
WEIGHTS_RTOL, WEIGHTS_ATOL = 1e-4, 1e-6
MESSAGES = {
    "ex4.no_backoff": {
        "vi": "train_step_with_backoff() để lỗi hết bộ nhớ thoát ra: bắt nó, chia đôi micro-batch và thử lại với "
              "gradient accumulation. ({error})",
        "en": "train_step_with_backoff() let the out-of-memory error escape: catch it, halve the micro-batch and "
              "retry with gradient accumulation. ({error})",
    },
    "ex4.retry_inside_except": {
        "vi": "train_step_with_backoff() thử lại ngay trong khối except nên lại hết bộ nhớ: ở đó các tensor của lần "
              "thử hỏng vẫn còn sống (traceback của exception giữ frame của nó). Hãy ra khỏi khối except trước — ghi "
              "nhận lỗi, rồi dọn và thử lại sau khối đó (PyTorch FAQ: \"My out of memory exception handler can't "
              "allocate memory\"). ({error})",
        "en": "train_step_with_backoff() retried inside the except block and ran out of memory again: there the "
              "failed try's tensors are still alive (the exception's traceback holds its frame). Leave the except "
              "block first — note the failure, then free and retry after it (PyTorch FAQ: \"My out of memory "
              "exception handler can't allocate memory\"). ({error})",
    },
    "ex4.backoff_not_pair": {
        "vi": "train_step_with_backoff() phải trả về (loss trung bình dạng float, kích thước micro-batch), nhận được "
              "{got}.",
        "en": "train_step_with_backoff() must return (mean loss as float, micro-batch size), got {got}.",
    },
    "ex4.wrong_loss": {
        "vi": "Loss trả về {got} không phải loss trung bình trên cả batch: cộng phần đóng góp của từng micro-batch, "
              "mỗi phần theo tỉ lệ kích thước của nó.",
        "en": "The returned loss {got} is not the mean loss over the whole batch: add up each micro-batch's share, "
              "in proportion to its size.",
    },
    "ex4.grads_not_full_batch": {
        "vi": "Sau bước train, trọng số khác với bước train trên cả batch: nhân loss mỗi micro-batch với "
              "len(micro_batch) / len(batch) — chia cho số micro-batch chỉ đúng khi batch chia đều — để gradient cộng "
              "dồn bằng gradient cả batch, và xóa gradient của lần thử hỏng.",
        "en": "After the step the weights differ from a full-batch step: scale each micro-batch loss by "
              "len(micro_batch) / len(batch) — dividing by the number of micro-batches is right only when the "
              "batch splits evenly — so the accumulated gradients equal the full batch's, and zero the gradients "
              "of the failed try.",
    },
}


def halvings(batch: int) -> set[int]:
    """Every size that halving reaches from ``batch``, rounding down or up: 602, 301, 150 or 151, ..."""
    found: set[int] = set()
    roundings: tuple[Callable[[int], int], ...] = (lambda m: m // 2, lambda m: (m + 1) // 2)
    for rounding in roundings:
        size = batch
        while size > 1:
            found.add(size)
            size = rounding(size)
        found.add(1)
    return found


def peak_bytes(micro: int, seed: int = EX4_SEED) -> int:
    model, inputs, targets = ex4_problem(torch.device("cpu"), seed)
    meter = MemoryMeter()
    with meter:
        ex4_reference_step(model, inputs, targets, micro)
    return meter.peak


@same_for_every_grading
def budget_forcing_backoff() -> int:
    """Between the reference's peaks at B/4 and B/2: the full batch cannot fit, a quarter can.

    The same for every draw: the meter counts storages, whose sizes follow the problem's shapes
    (EX4_BATCH, the model), never its drawn values (tests/test_reference.py checks it); so a judge
    server computes it once for a class (grader/judge/ahead.py).

    Measured here (CPU, torch 2.13; the hidden layer 512 wide since 2026-12-04, 2048 before — four
    times the arithmetic in the judge and on every device of the learner process, for the same
    verdicts): peak(602) 3.68 MiB, peak(301) 1.98 MiB, peak(151) 1.10 MiB, peak(76) 0.67 MiB; the
    budget, 1.55 MiB, sits mid-way between B/4 and B/2, so an honest back-off halves twice (one that
    holds more than the reference at a quarter of the batch halves once more, and still passes: any
    halving does). The live tensors are the same on every device (the meter counts
    storages, not a caching allocator's segments).
    """
    return (peak_bytes(BATCH // 2) + peak_bytes((BATCH + 3) // 4)) // 2  # between 301 and 151


def step(ex4: LearnerModule, dev: Device, budget: int | None, seed: int) -> tuple[object, object, dict[str, Any]]:
    """train_step_with_backoff on ``dev`` (inside ``with dev:``) under ``budget`` bytes of live tensors,
    on the problem of ``seed`` (the grading's draw): the loss and micro-batch it returned, and the
    model's state it left (``{"device", "params"}``)."""
    model, inputs, targets, optimizer = dev.build("ex4.problem", seed)
    (loss_fn,) = dev.build("loss.cross_entropy")
    try:
        with dev.instruments(meter_budget=budget):
            result = ex4.train_step_with_backoff(model, inputs, targets, loss_fn, optimizer)
    except LearnerRaised as raised:
        if is_oom(raised):
            if names_oom(raised.handling):  # raised while handling an earlier one: retried inside the except
                fail("ex4.retry_inside_except", error=cut(raised.exc_text, 160))
            fail("ex4.no_backoff", error=cut(raised.exc_text, 160))
        raise
    if not isinstance(result, tuple) or len(result) != 2:
        fail("ex4.backoff_not_pair", got=repr(result)[:60])
    return result[0], result[1], dev.inspect(model)


def same_as_full_batch(dev: Device, state: dict[str, Any], loss: object, seed: int) -> None:
    """The weights the step left (read back from the learner process) and its loss match the
    reference step on the full batch of the problem of ``seed``, computed here.

    The weights first: a step whose accumulated gradients are wrong returns a wrong loss too, but
    by how much depends on the draw (dividing by the number of micro-batches is off by ~0.2 times
    the last micro-batch's loss less the others' mean, inside the loss's tolerance on 3 draws in 600),
    while its weights are off on every draw; their message names the cause. A loss that alone is
    wrong (overwritten rather than summed) is told so."""
    reference, expected_loss = trained_copy(seed)
    for mine, ref in zip(state["params"], reference.parameters(), strict=True):
        if not allclose(mine.detach().cpu(), ref.detach(), rtol=WEIGHTS_RTOL, atol=WEIGHTS_ATOL):
            fail("ex4.grads_not_full_batch", device=dev.label)
    if not is_number(loss) or abs(float(loss) - expected_loss) > 1e-4 * max(1.0, abs(expected_loss)):
        fail("ex4.wrong_loss", device=dev.label, got=str(loss)[:40])


@functools.lru_cache(maxsize=2)
def trained_copy(seed: int) -> tuple[torch.nn.Module, float]:
    """The full-batch reference step on the problem of ``seed``: computed once per judge process
    (both back-off checks compare each device with it); read it, never train it further."""
    model, inputs, targets = ex4_problem(torch.device("cpu"), seed)
    reference = copy.deepcopy(model)
    loss = ex4_reference_step(reference, inputs, targets, BATCH)
    return reference, loss
