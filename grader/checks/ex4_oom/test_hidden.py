"""Exercise 4, hidden checks: memory really freed, empty_cache after the release, the print,
and a training step whose back-off keeps the full batch's gradients."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

from grader.checks.ex4_oom.budget import CHUNK_MB, MiB, fill_accelerator, is_oom, run_fill
from grader.checks.ex4_oom.workload import BATCH, budget_forcing_backoff, make_problem, optimizer_for, trained_copy
from grader.checks.support.devices import Accelerator, real_accelerator_type
from grader.checks.support.learner import LearnerModule
from grader.checks.support.meter import MemoryMeter
from grader.checks.support.outcomes import LearnerRaised, fail
from grader.checks.support.trusted import allclose, is_number

CHUNK = CHUNK_MB * MiB


def test_fill_until_oom_frees_memory(ex4: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with fill_accelerator(accel) as acc:
        _, still_live = run_fill(ex4, acc)
    if still_live >= CHUNK:
        fail("ex4.memory_not_freed", mib=f"{still_live / MiB:.0f}")


def test_fill_until_oom_empty_cache_after_release(ex4: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with fill_accelerator(accel) as acc:
        baseline = acc.live_bytes()
        run_fill(ex4, acc)
        calls = [e for e in acc.events if e.kind == "empty_cache"]
    if not calls:
        fail("ex4.no_empty_cache")
    if all(e.live_bytes - baseline >= CHUNK for e in calls):
        fail("ex4.empty_cache_while_referenced", mib=f"{(calls[-1].live_bytes - baseline) / MiB:.0f}")


def test_fill_until_oom_prints_allocated(ex4: LearnerModule, accel: Callable[..., Accelerator],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with fill_accelerator(accel) as acc:
        run_fill(ex4, acc)
    printed = capsys.readouterr().out
    if not re.search(r"\d", printed):
        fail("ex4.no_print")


def _device() -> torch.device:
    return torch.device("cuda") if real_accelerator_type() == "cuda" else torch.device("cpu")


def _step(ex4: LearnerModule, budget: int | None,
          request: pytest.FixtureRequest) -> tuple[object, object, torch.nn.Module]:
    device = _device()
    request.node.user_properties.append(("mode", device.type))
    model, inputs, targets = make_problem(device)
    meter = MemoryMeter(budget, f"{device.type} (grader's budget)")
    try:
        with meter:
            result = ex4.train_step_with_backoff(model, inputs, targets, torch.nn.functional.cross_entropy,
                                                 optimizer_for(model))
    except LearnerRaised as raised:
        if is_oom(raised):
            fail("ex4.no_backoff", error=raised.exc_text[:160])
        raise
    if not isinstance(result, tuple) or len(result) != 2:
        fail("ex4.backoff_not_pair", got=repr(result)[:60])
    return result[0], result[1], model


def _same_as_full_batch(model: torch.nn.Module, loss: object) -> None:
    reference, expected_loss = trained_copy(_device())
    if not is_number(loss) or abs(float(loss) - expected_loss) > 1e-4 * max(1.0, abs(expected_loss)):
        fail("ex4.wrong_loss", got=loss, expected=f"{expected_loss:.6f}")
    for mine, ref in zip(model.parameters(), reference.parameters(), strict=True):
        if not allclose(mine.detach(), ref.detach(), rtol=1e-4, atol=1e-6):
            fail("ex4.grads_not_full_batch")


def test_backoff_matches_full_batch(ex4: LearnerModule, request: pytest.FixtureRequest) -> None:
    loss, micro, model = _step(ex4, budget_forcing_backoff(_device()), request)
    if not isinstance(micro, int) or not 1 <= micro < BATCH:
        fail("ex4.micro_not_reduced", got=micro, batch=BATCH)
    _same_as_full_batch(model, loss)


def test_backoff_full_batch_when_it_fits(ex4: LearnerModule, request: pytest.FixtureRequest) -> None:
    loss, micro, model = _step(ex4, None, request)
    if micro != BATCH:
        fail("ex4.shrinks_without_oom", got=micro, batch=BATCH)
    _same_as_full_batch(model, loss)
