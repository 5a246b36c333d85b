"""ex1.pick_device_falls_back_to_cpu: with no GPU at all, the CPU — the lesson's headline mistake
is a hard-coded "cuda"; asking torch.backends.mps.is_built() instead of is_available() is another (public)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex1_device.common import pick
from grader.judge.api import LearnerModule, RemoteWorld, fail

HINT = {
    "vi": "Đọc lại mục \"device-agnostic\": code phải chạy được trên máy không có GPU.",
    "en": "Reread \"device-agnostic\": the code must run on a machine without a GPU.",
}
MESSAGES = {
    "ex1.hardcoded_cuda": {
        "vi": "Khi không có GPU ({situation}) pick_device() vẫn trả về {got}: đừng hard-code thiết bị — hãy kiểm "
              "tra torch.cuda.is_available() và torch.backends.mps.is_available().",
        "en": "With no GPU ({situation}) pick_device() still returned {got}: do not hard-code the device — check "
              "torch.cuda.is_available() and torch.backends.mps.is_available().",
    },
}


def test_pick_device_falls_back_to_cpu(ex1: LearnerModule, machine: Callable[..., RemoteWorld]) -> None:
    # A CPU-only box, and a Mac whose PyTorch has MPS built in but cannot use it (is_built() is not
    # is_available()).
    for mps_built in (False, True):
        device, expected, situation = pick(ex1, machine, cuda=False, mps=False, mps_built=mps_built)
        if device.type != expected.type:
            fail("ex1.hardcoded_cuda", situation=situation, got=device)
