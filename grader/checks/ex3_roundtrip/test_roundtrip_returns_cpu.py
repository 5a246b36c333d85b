"""ex3.roundtrip_returns_cpu: the result comes back to the CPU (hidden)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex3_roundtrip.common import roundtrip
from grader.judge.api import Device, LearnerModule, device_of, fail

HINT = {
    "vi": "Đọc lại ba cách chuyển tensor: .cpu().",
    "en": "Reread the three ways to move a tensor: .cpu().",
}
MESSAGES = {
    "ex3.left_on_device": {
        "vi": "roundtrip() trả về tensor trên {got}: đưa kết quả về CPU bằng .cpu() (hoặc .to(\"cpu\")).",
        "en": "roundtrip() returned a tensor on {got}: move the result back with .cpu() (or .to(\"cpu\")).",
    },
}


def test_roundtrip_returns_cpu(ex3: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cuda", "mps"):
        with dev:
            where = device_of(roundtrip(ex3, dev, torch.ones(4)))  # where it was, in the learner process
        if where != "cpu":
            fail("ex3.left_on_device", device=dev.label, got=where)
