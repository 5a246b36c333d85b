"""ex1.pick_device_prefers_cuda: with CUDA and an Apple GPU both there, CUDA (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex1_device.common import pick
from grader.judge.api import LearnerModule, RemoteWorld, fail

HINT = {
    "vi": "Đọc lại mục \"device-agnostic\": CUDA đứng đầu.",
    "en": "Reread \"device-agnostic\": CUDA comes first.",
}


def test_pick_device_prefers_cuda(ex1: LearnerModule, machine: Callable[..., RemoteWorld]) -> None:
    device, expected, situation = pick(ex1, machine, cuda=True, mps=True)
    if device.type != expected.type or device.index not in (None, 0):
        fail("ex1.wrong_order", situation=situation, got=device, expected=expected)
