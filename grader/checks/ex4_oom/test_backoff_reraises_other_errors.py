"""ex4.backoff_reraises_other_errors: only running out of memory is retried — a shape or device
error reaches the caller, not a smaller micro-batch (the PyTorch FAQ's `except RuntimeError:`
catches them all, and hides a real bug) (hidden)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex4_oom.workload import make_problem, optimizer_for
from grader.checks.support.devices import Device
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import LearnerRaised, fail

HINT = {
    "vi": "Đọc lại bài tập 4: chỉ bắt lỗi hết bộ nhớ (torch.OutOfMemoryError), không bắt mọi RuntimeError.",
    "en": "Reread exercise 4: catch only running out of memory (torch.OutOfMemoryError), not every RuntimeError.",
}
MESSAGES = {
    "ex4.swallows_other_errors": {
        "vi": "train_step_with_backoff() nuốt một lỗi không phải hết bộ nhớ ({error}) và thử lại với micro-batch "
              "nhỏ hơn: chỉ bắt torch.OutOfMemoryError, để lỗi khác thoát ra.",
        "en": "train_step_with_backoff() swallowed an error that was not out of memory ({error}) and retried with "
              "a smaller micro-batch: catch only torch.OutOfMemoryError and let other errors through.",
    },
}
NOT_OOM = "grader's test error: mat1 and mat2 shapes cannot be multiplied (not an out-of-memory error)"


def _breaks_once() -> Callable[..., torch.Tensor]:
    """A loss function that raises a RuntimeError that is not an OOM, the first time only."""
    calls = {"n": 0}

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError(NOT_OOM)
        return torch.nn.functional.cross_entropy(out, target)

    return loss_fn


def test_backoff_reraises_other_errors(ex4: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cpu"):
        with dev:
            model, inputs, targets = make_problem(dev.device)
            try:
                ex4.train_step_with_backoff(model, inputs, targets, _breaks_once(), optimizer_for(model))
            except LearnerRaised as raised:
                if NOT_OOM in raised.exc_text:
                    continue  # the error reached the caller
                raise
        fail("ex4.swallows_other_errors", error=f"RuntimeError: {NOT_OOM}")
