"""ex3.to_numpy_cpu: a CPU tensor to a NumPy array (public)."""

from __future__ import annotations

import numpy
import torch

from grader.checks.ex3_roundtrip.common import expect_array
from grader.judge.api import LearnerModule

HINT = {
    "vi": "Đọc lại mục \"NumPy chỉ ở CPU\".",
    "en": "Reread \"NumPy chỉ ở CPU\".",
}


def test_to_numpy_cpu(ex3: LearnerModule, cpu: torch.device) -> None:
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    expected = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    expect_array(ex3.to_numpy(t), expected)
