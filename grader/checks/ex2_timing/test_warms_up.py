"""ex2.warms_up: a matmul on the device runs before the measured interval starts — a warm-up
that is itself timed and thrown away (timm's loop, benchmark.Timer) counts (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex2_timing.common import SMALLER, device_matmuls, interval_of, timed
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại speed test: dòng warm-up.",
    "en": "Reread the speed test: the warm-up line.",
}
MESSAGES = {
    "ex2.no_warmup": {
        "vi": "Thiếu warm-up: matmul đầu tiên trên GPU còn tốn thời gian load cuBLAS + autotune. Chạy một matmul (và "
              "synchronize) trước khi bắt đầu đo.",
        "en": "No warm-up: the first matmul on a GPU also loads cuBLAS and autotunes. Run one matmul (and "
              "synchronize) before starting the clock.",
    },
}


def test_warms_up(ex2: LearnerModule, devices: Callable[..., list[Device]], draw: Draw) -> None:
    for dev in devices("cuda", "mps", virtual_clock=True, smaller=SMALLER):
        with dev:
            seconds, events = timed(ex2, dev, draw.matmul_n)
        interval = interval_of(events, seconds, dev)
        # A real device's number that no two clock reads give (timm's sum of per-step times, a median)
        # has no interval to put the warm-up before: the first read would be the timed warm-up's own.
        # Not judged there; a stand-in's is always a pair, and grades the same code.
        if interval is not None and interval.found and not any(i < interval.start
                                                                for i in device_matmuls(events, dev)):
            fail("ex2.no_warmup", device=dev.label)
