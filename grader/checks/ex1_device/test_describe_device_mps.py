"""ex1.describe_device_mps: an Apple GPU is described without torch.cuda, which a Mac does not
have — one device, no capability, no total memory (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex1_device.common import check_common, check_not_cuda
from grader.judge.api import Device, LearnerModule

HINT = {
    "vi": "Đọc lại docstring: với device không phải cuda, không gọi torch.cuda (máy Mac không có CUDA).",
    "en": "Reread the docstring: for a device that is not cuda, do not call torch.cuda (a Mac has no CUDA).",
}


def test_describe_device_mps(ex1: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("mps"):
        with dev:
            info = ex1.describe_device(dev.device)
        check_common(info, dev.device)
        check_not_cuda(info)
