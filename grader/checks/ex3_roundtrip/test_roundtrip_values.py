"""ex3.roundtrip_values: x * 2 + 1, on the CPU, on CUDA and on MPS (public)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex3_roundtrip.common import expect_values, roundtrip
from grader.judge.api import Device, LearnerModule
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại bài tập 3 trong phần \"Bài tập\".",
    "en": "Reread exercise 3 in \"Bài tập\".",
}


def test_roundtrip_values(ex3: LearnerModule, devices: Callable[..., list[Device]], draw: Draw) -> None:
    scale, offset = draw.roundtrip_offset("values")  # this grading's input: no earlier answer fits it
    expected = torch.arange(10, dtype=torch.float32) * scale + offset
    expected = expected * 2 + 1
    for dev in devices("cpu", "cuda", "mps"):
        x = torch.arange(10, dtype=torch.float32) * scale + offset
        with dev:
            result = roundtrip(ex3, dev, x)
        expect_values(dev, result, expected)
