"""ex2.tensors_created_on_device: the matmuls run on the device, and nothing is copied there
inside the measured interval (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex2_timing.common import SMALLER, device_matmuls, interval_of, timed
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại mục \"Tạo tensor trực tiếp trên device\".",
    "en": "Reread \"Tạo tensor trực tiếp trên device\".",
}
MESSAGES = {
    "ex2.copies_in_loop": {
        "vi": "Vòng lặp được đo có copy tensor sang device (.to(device) / .cuda()): hãy tạo tensor trực tiếp trên "
              "device, vd torch.randn(n, n, device=device), trước khi bắt đầu đo.",
        "en": "The timed loop copies tensors to the device (.to(device) / .cuda()): create them directly on the "
              "device, e.g. torch.randn(n, n, device=device), before starting the clock.",
    },
    "ex2.not_on_device": {
        "vi": "Không matmul nào chạy trên device được giao: tạo tensor với device=device.",
        "en": "No matmul ran on the device it was given: create the tensors with device=device.",
    },
}


def test_tensors_created_on_device(ex2: LearnerModule, devices: Callable[..., list[Device]], draw: Draw) -> None:
    for dev in devices("cuda", "mps", virtual_clock=True, smaller=SMALLER):
        with dev:
            seconds, events = timed(ex2, dev, draw.matmul_n)
        interval = interval_of(events, seconds, dev)
        if interval is not None and any(e.kind == "h2d" for e in events[interval.start:interval.stop]):
            fail("ex2.copies_in_loop", device=dev.label)
        if not device_matmuls(events, dev):
            fail("ex2.not_on_device", device=dev.label)
