"""ex5.fp32_losses: without AMP, the loop trains like a plain Adam + CrossEntropyLoss loop, on
the CPU, on CUDA and on MPS (public)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex5_amp.workload import Earlier, reference_fp32, small, train
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại bước train trong ví dụ tổng hợp.",
    "en": "Reread the training step of the full example.",
}
MESSAGES = {
    "ex5.fp32_mismatch": {
        "vi": "Loss FP32 ở bước {step} khác với vòng lặp Adam + CrossEntropyLoss thông thường chạy từ cùng điểm "
              "xuất phát: zero_grad, forward, loss, backward, step — mỗi bước một lần, trên cả batch, đúng lr.",
        "en": "The FP32 loss of step {step} differs from a plain Adam + CrossEntropyLoss loop run from the same "
              "start: zero the grads, forward, loss, backward, step — once per step, on the full batch, lr as "
              "given.",
    },
}
STEPS = 3


def test_fp32_losses(ex5: LearnerModule, devices: Callable[..., list[Device]], draw: Draw, earlier: Earlier) -> None:
    expected = reference_fp32(small(draw), STEPS, draw.ex5_lr)
    for dev in devices("cpu", "cuda", "mps"):
        with dev:
            problem = dev.build("ex5.problem", *small(draw))
            losses = train(ex5, dev, problem, STEPS, None, lr=draw.ex5_lr, strict=True).losses
            if dev.device.type != "cpu":
                earlier.saw_model(dev, problem[0])  # for the check of where the model goes
        for step, (got, want) in enumerate(zip(losses, expected, strict=True), start=1):
            if abs(got - want) > 1e-4 * max(1.0, abs(want)):
                # Which step, never the numbers: the reference's losses would answer this grading.
                fail("ex5.fp32_mismatch", device=dev.label, step=step)
