"""ex5.modern_amp_api: torch.amp.autocast / torch.amp.GradScaler, not the deprecated
torch.cuda.amp.* and torch.cpu.amp.* (hidden). Where fp16_uses_grad_scaler finished a float16
training on the device, it reads what that one called (workload.Earlier) rather than training again."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex5_amp.workload import Earlier, small, train
from grader.judge.api import Device, Hello, LearnerModule, fail, runs_amp
from grader.reference.draws import Draw

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


def test_modern_amp_api(ex5: LearnerModule, devices: Callable[..., list[Device]], hello: Hello,
                        draw: Draw, earlier: Earlier) -> None:
    for dev in devices("cpu", "cuda", real_ok=lambda mode: runs_amp(hello, mode, torch.float16)):
        deprecated = earlier.deprecated.get(dev.label)
        if deprecated is None:
            with dev, dev.instruments(watch_amp=True) as calls:
                train(ex5, dev, dev.build("ex5.problem", *small(draw)), 1, torch.float16)
            deprecated = tuple(calls.deprecated)
        else:
            dev.graded_from_earlier()
        if deprecated:
            fail("ex5.deprecated_amp", device=dev.label, api=", ".join(sorted(set(deprecated))))
