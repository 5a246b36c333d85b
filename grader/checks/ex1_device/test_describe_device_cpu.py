"""ex1.describe_device_cpu: a CPU is one device, with no capability and no total memory (hidden)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex1_device.common import check_common, check_not_cuda
from grader.judge.api import LearnerModule, RemoteWorld

HINT = {
    "vi": "Đọc lại docstring: CPU có gì và không có gì (capability, tổng bộ nhớ).",
    "en": "Reread the docstring: what a CPU has and has not (capability, total memory).",
}


def test_describe_device_cpu(ex1: LearnerModule, cpu: torch.device, machine: Callable[..., RemoteWorld]) -> None:
    # Two GPUs present: a CPU's count is still 1, whatever torch.cuda.device_count() says.
    with machine(cuda=True, mps=False, cuda_count=2):
        info = ex1.describe_device(cpu)
    check_common(info, cpu)
    check_not_cuda(info)
