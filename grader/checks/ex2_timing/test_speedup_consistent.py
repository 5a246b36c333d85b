"""ex2.speedup_consistent: speedup() is time_matmul on the CPU over time_matmul on the device, by
the learner's own timings, so a timing mistake is not charged twice (hidden)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex2_timing.common import SMALLER
from grader.judge.api import Device, LearnerModule, fail, is_number
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại ví dụ tổng hợp: Speedup = cpu_t / gpu_t.",
    "en": "Reread the full example: Speedup = cpu_t / gpu_t.",
}
MESSAGES = {
    "ex2.speedup_not_number": {
        "vi": "speedup() phải trả về một số float dương, nhận được {got}.",
        "en": "speedup() must return a positive float, got {got}.",
    },
    "ex2.speedup_inconsistent": {
        "vi": "speedup() trả về {got}, nhưng time_matmul trên cpu / trên device cho {expected}: trả về "
              "time_matmul(n, cpu) / time_matmul(n, device).",
        "en": "speedup() returned {got}, but time_matmul on cpu / on the device gives {expected}: return "
              "time_matmul(n, cpu) / time_matmul(n, device).",
    },
}


def test_speedup_consistent(ex2: LearnerModule, devices: Callable[..., list[Device]], draw: Draw) -> None:
    for dev in devices("cuda", "mps", virtual_clock=True, smaller=SMALLER):
        n = dev.size(draw.matmul_n)
        with dev:
            ratio = ex2.speedup(n, dev.device, repeats=3)
        if isinstance(ratio, torch.Tensor) or not is_number(ratio) or ratio <= 0:
            fail("ex2.speedup_not_number", device=dev.label, got=repr(ratio)[:60])
        if not dev.virtual:
            continue
        # Deterministic: a fresh stand-in replays the learner's own timings exactly.
        (again,) = devices(dev.device.type, virtual_clock=True, smaller=SMALLER)
        with again:
            cpu_time = ex2.time_matmul(n, torch.device("cpu"), repeats=3)
            device_time = ex2.time_matmul(n, again.device, repeats=3)
        if not (is_number(cpu_time) and is_number(device_time) and device_time > 0):
            continue  # time_matmul's own checks report this
        expected = cpu_time / device_time
        if not 0.9 < ratio / expected < 1.1:
            fail("ex2.speedup_inconsistent", device=dev.label, got=f"{ratio:.2f}", expected=f"{expected:.2f}")
