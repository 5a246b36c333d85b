"""ex5.bf16_uses_autocast: with bfloat16 the matmuls run in bfloat16 — on every device, not only
CUDA (hidden). A real GPU without bfloat16 (a T4, an Apple GPU before macOS 14) grades on the stand-in."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex5_amp.workload import make_problem, reduced_matmuls, train
from grader.checks.support.devices import Device, runs_amp
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail

HINT = {
    "vi": "Đọc lại mục \"Mixed precision\": autocast bọc forward pass.",
    "en": "Reread \"Mixed precision\": autocast wraps the forward pass.",
}
STEPS = 2


def test_bf16_uses_autocast(ex5: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cpu", "cuda", "mps", real_ok=lambda mode: runs_amp(mode, torch.bfloat16)):
        model, inputs, targets = make_problem(64, 8, 32, 3)
        with dev:
            train(ex5, model, inputs, targets, dev.device, STEPS, torch.bfloat16)
        if reduced_matmuls(dev, torch.bfloat16) == 0:
            fail("ex5.no_autocast", device=dev.label, dtype="bfloat16")
