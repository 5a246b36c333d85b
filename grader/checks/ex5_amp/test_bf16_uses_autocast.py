"""ex5.bf16_uses_autocast: with bfloat16 the matmuls run in bfloat16 — on every device, not only
CUDA (hidden). A real GPU without bfloat16 (a T4, an Apple GPU before macOS 14) grades on the stand-in."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex5_amp.workload import AMP_STEPS, really_reduced, small, train
from grader.judge.api import Device, Hello, LearnerModule, fail, runs_amp
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại mục \"Mixed precision\": autocast bọc forward pass.",
    "en": "Reread \"Mixed precision\": autocast wraps the forward pass.",
}


def test_bf16_uses_autocast(ex5: LearnerModule, devices: Callable[..., list[Device]], hello: Hello,
                  draw: Draw) -> None:
    for dev in devices("cpu", "cuda", "mps", real_ok=lambda mode: runs_amp(hello, mode, torch.bfloat16)):
        with dev:
            trained = train(ex5, dev, dev.build("ex5.problem", *small(draw)), AMP_STEPS, torch.bfloat16,
                            lr=draw.ex5_lr, autocast=True)
        if really_reduced(dev, torch.bfloat16, trained, small(draw), draw.ex5_lr) == 0:
            fail("ex5.no_autocast", device=dev.label, dtype="bfloat16")
