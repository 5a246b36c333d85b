"""ex4.backoff_reraises_other_errors: only running out of memory is retried — a shape or device
error reaches the caller, not a smaller micro-batch (the PyTorch FAQ's `except RuntimeError:`
catches them all, and hides a real bug) (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.judge.api import Device, LearnerModule, LearnerRaised, fail
from grader.reference.draws import Draw
from grader.reference.problems import NOT_OOM

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
def test_backoff_reraises_other_errors(ex4: LearnerModule, devices: Callable[..., list[Device]],
                                       draw: Draw) -> None:
    for dev in devices("cpu"):
        with dev:
            model, inputs, targets, optimizer = dev.build("ex4.problem", draw.ex4_seed)
            (breaks_once,) = dev.build("loss.breaks_once")  # a RuntimeError that is not an OOM, once
            try:
                ex4.train_step_with_backoff(model, inputs, targets, breaks_once, optimizer)
            except LearnerRaised as raised:
                if NOT_OOM in raised.exc_text:
                    continue  # the error reached the caller
                raise
        fail("ex4.swallows_other_errors", error=f"RuntimeError: {NOT_OOM}")
