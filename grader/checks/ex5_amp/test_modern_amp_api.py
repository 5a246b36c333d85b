"""ex5.modern_amp_api: torch.amp.autocast / torch.amp.GradScaler, not the deprecated
torch.cuda.amp.* and torch.cpu.amp.* (hidden)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from grader.checks.ex5_amp.workload import make_problem, train, watch_amp
from grader.checks.support.devices import Device, runs_amp
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail

HINT = {
    "vi": "Đọc lại: torch.cuda.amp.autocast() đã deprecated.",
    "en": "Reread: torch.cuda.amp.autocast() is deprecated.",
}
MESSAGES = {
    "ex5.deprecated_amp": {
        "vi": "{api} đã deprecated: dùng torch.amp.autocast(device_type=...) và torch.amp.GradScaler(device.type).",
        "en": "{api} is deprecated: use torch.amp.autocast(device_type=...) and torch.amp.GradScaler(device.type).",
    },
}


def test_modern_amp_api(ex5: LearnerModule, devices: Callable[..., list[Device]],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    for dev in devices("cpu", "cuda", real_ok=lambda mode: runs_amp(mode, torch.float16)):
        model, inputs, targets = make_problem(64, 8, 32, 3)
        with monkeypatch.context() as patch, watch_amp(patch) as calls, dev:
            train(ex5, model, inputs, targets, dev.device, 1, torch.float16)
        if calls.deprecated:
            fail("ex5.deprecated_amp", device=dev.label, api=", ".join(sorted(set(calls.deprecated))))
