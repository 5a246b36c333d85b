"""ex3.roundtrip_keeps_dtype: the result has x's dtype, whatever it is (hidden)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex3_roundtrip.common import expect_values, roundtrip
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại: to() cũng nhận dtype.",
    "en": "Reread: to() also takes a dtype.",
}
MESSAGES = {
    "ex3.dtype_changed": {
        "vi": "Với input dtype {given}, roundtrip() trả về {got}: giữ nguyên dtype của x (vd .to(\"cpu\", "
              "dtype=x.dtype)).",
        "en": "For an input of dtype {given} roundtrip() returned {got}: keep x's dtype (e.g. .to(\"cpu\", "
              "dtype=x.dtype)).",
    },
}


def test_roundtrip_keeps_dtype(ex3: LearnerModule, devices: Callable[..., list[Device]], draw: Draw) -> None:
    scale, offset = draw.roundtrip_offset("dtype")  # small integers: exact in float16 and int64 alike
    for dev in devices("cuda", "mps"):
        for dtype in (torch.float64, torch.int64, torch.float16):
            if not dev.holds(dtype):
                continue  # float64 on an Apple GPU: MPS has none, .to("mps") itself would fail
            x = (torch.arange(8) * scale + offset).to(dtype)
            expected = x * 2 + 1
            with dev:
                result = roundtrip(ex3, dev, x.clone())
            if result.dtype != dtype:
                fail("ex3.dtype_changed", device=dev.label, given=dtype, got=result.dtype)
            expect_values(dev, result, expected)
