"""ex5.fp32_losses: without AMP, the loop trains like a plain Adam + CrossEntropyLoss loop, on
the CPU, on CUDA and on MPS (public)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex5_amp.workload import SMALL, reference_fp32, train
from grader.judge.api import Device, LearnerModule, fail

HINT = {
    "vi": "Đọc lại bước train trong ví dụ tổng hợp.",
    "en": "Reread the training step of the full example.",
}
MESSAGES = {
    "ex5.fp32_mismatch": {
        "vi": "Loss FP32 khác với vòng lặp Adam + CrossEntropyLoss thông thường ({got} so với {expected}): zero_grad, "
              "forward, loss, backward, step — mỗi bước một lần, trên cả batch, đúng lr.",
        "en": "The FP32 losses differ from a plain Adam + CrossEntropyLoss loop ({got} vs {expected}): zero the "
              "grads, forward, loss, backward, step — once per step, on the full batch, lr as given.",
    },
}
STEPS = 3


def test_fp32_losses(ex5: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    expected = reference_fp32(SMALL, STEPS)
    for dev in devices("cpu", "cuda", "mps"):
        with dev:
            losses = train(ex5, dev, dev.build("ex5.problem", *SMALL), STEPS, None, strict=True)
        for got, want in zip(losses, expected, strict=True):
            if abs(got - want) > 1e-4 * max(1.0, abs(want)):
                fail("ex5.fp32_mismatch", device=dev.label, got=f"{got:.5f}", expected=f"{want:.5f}")
