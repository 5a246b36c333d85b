"""ex3.roundtrip_computes_on_device: the arithmetic runs on the device it is handed — the lesson's
headline mistake, `x.to(device)` not assigned, computes on the CPU; and on a GPU machine, handed the CPU,
it computes there, not on a device the module chose at its top and used in place of its argument (public)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex3_roundtrip.common import roundtrip
from grader.judge.api import Device, LearnerModule, fail

HINT = {
    "vi": "Đọc lại: \"tensor.to() không in-place\".",
    "en": "Reread \"tensor.to() không in-place\".",
}
MESSAGES = {
    "ex3.no_compute": {
        "vi": "roundtrip() không tính gì cả: hãy tính x * 2 + 1.",
        "en": "roundtrip() did no arithmetic: compute x * 2 + 1.",
    },
    "ex3.to_not_assigned": {
        "vi": "Phép tính chạy trên CPU chứ không phải trên device: tensor.to() không in-place — phải gán lại: "
              "x = x.to(device).",
        "en": "The arithmetic ran on the CPU, not on the device: tensor.to() is not in-place — assign the result: "
              "x = x.to(device).",
    },
    "ex3.device_argument_ignored": {
        "vi": "roundtrip(x, torch.device(\"cpu\")) vẫn tính trên {kind} của máy: hãy dùng `device` được truyền vào, "
              "không phải device chọn ở đầu file.",
        "en": "roundtrip(x, torch.device(\"cpu\")) still computed on the machine's {kind}: use the `device` it is "
              "handed, not a device chosen at the top of the file.",
    },
}


def test_roundtrip_computes_on_device(ex3: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cuda", "mps"):
        with dev:
            roundtrip(ex3, dev, torch.arange(12, dtype=torch.float32))
            handed = len(dev.events)
            ex3.roundtrip(torch.arange(12, dtype=torch.float32), torch.device("cpu"))  # on this machine, the CPU
        ops = [e for e in dev.events[:handed] if e.kind in ("op", "matmul")]
        if not ops:
            fail("ex3.no_compute", device=dev.label)
        if not any(e.device == dev.device.type for e in ops):
            fail("ex3.to_not_assigned", device=dev.label)
        if any(e.kind in ("op", "matmul") and e.device == dev.device.type for e in dev.events[handed:]):
            fail("ex3.device_argument_ignored", device=dev.label, kind=dev.device.type)
