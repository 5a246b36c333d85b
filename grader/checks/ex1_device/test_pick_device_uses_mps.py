"""ex1.pick_device_uses_mps: with only an Apple GPU, mps (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex1_device.common import pick
from grader.judge.api import LearnerModule, RemoteWorld, fail

HINT = {
    "vi": "Đọc lại phiên bản hỗ trợ cả MPS của pattern chọn device.",
    "en": "Reread the version of the device pattern that supports MPS.",
}
MESSAGES = {
    "ex1.ignores_mps": {
        "vi": "Khi chỉ có Apple MPS ({situation}) pick_device() trả về {got}: kiểm tra "
              "torch.backends.mps.is_available() sau CUDA.",
        "en": "With only Apple MPS available ({situation}) pick_device() returned {got}: check "
              "torch.backends.mps.is_available() after CUDA.",
    },
}


def test_pick_device_uses_mps(ex1: LearnerModule, machine: Callable[..., RemoteWorld]) -> None:
    device, expected, situation = pick(ex1, machine, cuda=False, mps=True)
    if device.type != expected.type:
        fail("ex1.ignores_mps", situation=situation, got=device)
