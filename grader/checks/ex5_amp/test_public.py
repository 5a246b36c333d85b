"""Exercise 5, public check: the FP32 loop trains like the reference."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex5_amp.workload import make_problem, reference_fp32, train
from grader.checks.support.devices import Accelerator
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail

STEPS = 3


def test_fp32_losses(ex5: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    model, inputs, targets = make_problem(64, 8, 32, 3)
    expected = reference_fp32(model, inputs, targets, STEPS)
    with accel() as acc:
        losses = train(ex5, model, inputs, targets, acc.device, STEPS, None, strict=True)
    for got, want in zip(losses, expected, strict=True):
        if abs(got - want) > 1e-4 * max(1.0, abs(want)):
            fail("ex5.fp32_mismatch", got=f"{got:.5f}", expected=f"{want:.5f}")
