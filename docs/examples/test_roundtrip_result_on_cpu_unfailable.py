"""ex3.roundtrip_result_on_cpu_unfailable — the README's old sample, kept to show its bug: it can
never fail.

It reads ``.device`` of the value the judge rebuilt from the learner process's answer, which is a
tensor on the judge's CPU whatever device the learner's tensor was on. tests/test_examples.py
installs it beside docs/examples/test_roundtrip_result_on_cpu.py and shows that it passes the
mistake the other one catches. Read where a tensor lived with ``device_of()``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.judge.api import Device, LearnerModule, fail

HINT = {
    "vi": "Đọc lại ba cách chuyển tensor: .cpu().",
    "en": "Reread the three ways to move a tensor: .cpu().",
}
MESSAGES = {
    "ex3.result_not_on_cpu_unfailable": {
        "vi": "roundtrip() trả về tensor trên {got}.",
        "en": "roundtrip() returned a tensor on {got}.",
    },
}


def test_roundtrip_result_on_cpu_unfailable(ex3: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cuda", "mps"):
        with dev:
            where = ex3.roundtrip(torch.ones(4), dev.device).device  # the bug: always the judge's cpu
        if where.type != "cpu":
            fail("ex3.result_not_on_cpu_unfailable", device=dev.label, got=where)
