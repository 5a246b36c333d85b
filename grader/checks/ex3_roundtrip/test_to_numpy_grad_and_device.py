"""ex3.to_numpy_grad_and_device: to_numpy() of a tensor that requires grad, and of one on the
accelerator (hidden)."""

from __future__ import annotations

from collections.abc import Callable

import numpy
import torch

from grader.checks.ex3_roundtrip.common import expect_array
from grader.judge.api import Device, LearnerModule, LearnerRaised, fail

HINT = {
    "vi": "Đọc lại mục \"NumPy chỉ ở CPU\" và nghĩ về tensor requires grad.",
    "en": "Reread \"NumPy chỉ ở CPU\" and think about tensors that require grad.",
}
MESSAGES = {
    "ex3.numpy_requires_grad": {
        "vi": "to_numpy() lỗi với tensor requires grad ({error}): gọi .detach() trước.",
        "en": "to_numpy() failed for a tensor that requires grad ({error}): call .detach() first.",
    },
    "ex3.numpy_on_device": {
        "vi": "to_numpy() lỗi với tensor trên GPU ({error}): NumPy chỉ ở CPU — gọi .cpu() trước .numpy().",
        "en": "to_numpy() failed for a tensor on the GPU ({error}): NumPy lives on the CPU only — use .cpu() "
              "before .numpy().",
    },
}


def test_to_numpy_grad_and_device(ex3: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    expected = numpy.arange(5, dtype=numpy.float32)
    for dev in devices("cuda", "mps"):
        with dev:
            try:
                result = ex3.to_numpy(torch.arange(5, dtype=torch.float32, requires_grad=True))
            except LearnerRaised as raised:
                fail("ex3.numpy_requires_grad", device=dev.label, error=raised.exc_text)
            expect_array(result, expected, dev.label)
            try:
                result = ex3.to_numpy(dev.put(torch.arange(5, dtype=torch.float32)))
            except LearnerRaised as raised:
                fail("ex3.numpy_on_device", device=dev.label, error=raised.exc_text)
            expect_array(result, expected, dev.label)
