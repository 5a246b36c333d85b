"""ex1.pick_device_returns_device: a torch.device of the kind this machine has (public)."""

from __future__ import annotations

from grader.checks.ex1_device.common import as_device
from grader.judge.api import Hello, LearnerModule, fail, real_accelerator_type

HINT = {
    "vi": "Đọc lại mục \"device-agnostic\": device = torch.device(...).",
    "en": "Reread \"device-agnostic\": device = torch.device(...).",
}
MESSAGES = {
    "ex1.wrong_device_here": {
        "vi": "Trên máy này pick_device() trả về {got}, trong khi có {expected}.",
        "en": "On this machine pick_device() returned {got}, but {expected} is available.",
    },
}


def test_pick_device_returns_device(ex1: LearnerModule, hello: Hello) -> None:
    device = as_device(ex1.pick_device())
    expected = real_accelerator_type(hello) or "cpu"
    if device.type != expected:
        fail("ex1.wrong_device_here", got=device, expected=expected)
