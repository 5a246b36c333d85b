"""ex2.time_matmul_returns_seconds: the number is a time in seconds, on the CPU (public).

The bound is the call itself, as the judge's own clock saw it: the mean of matmuls timed inside
``time_matmul`` cannot be longer than the whole call, on any machine. A number in milliseconds is a
thousand times too long, however fast the CPU (a fixed "under 1 s" bound let it pass where a
384×384 matmul takes under a millisecond: an idle 2-core machine, any GPU box's CPU).
"""

from __future__ import annotations

import time

import torch

from grader.checks.ex2_timing.common import seconds_of
from grader.judge.api import LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại phần speed test: hiệu của time.time() tính bằng giây.",
    "en": "Reread the speed test: time.time() differences are seconds.",
}
MESSAGES = {
    "ex2.implausible_seconds": {
        "vi": "time_matmul() trả về {got} cho một matmul {n}×{n} trên CPU, nhưng cả lần gọi chỉ mất {took} giây: hãy "
              "trả về giây (không phải mili giây), là hiệu của time.time() hoặc time.perf_counter().",
        "en": "time_matmul() returned {got} for one {n}×{n} matmul on the CPU, but the whole call took {took} s: "
              "return seconds (not milliseconds), as a difference of time.time() or time.perf_counter().",
    },
}
# The judge's clock and the learner's are the machine's, but time.time() can be stepped (NTP) between
# the learner's two reads: a millisecond of slack. A number in milliseconds reads as 1000 matmuls; the
# call holds three (a warm-up, repeats=2) and the making of its two n×n inputs, far from 1000.
SLACK_SECONDS = 1e-3


def test_time_matmul_returns_seconds(ex2: LearnerModule, cpu: torch.device, draw: Draw) -> None:
    started = time.monotonic()
    returned = ex2.time_matmul(draw.matmul_n, cpu, repeats=2)
    took = time.monotonic() - started
    seconds = seconds_of(returned)
    if seconds > took + SLACK_SECONDS:
        fail("ex2.implausible_seconds", got=f"{seconds:g}", n=draw.matmul_n, took=f"{took:.3f}")
