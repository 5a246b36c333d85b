"""ex2.time_matmul_returns_seconds: a plausible number of seconds for one matmul on the CPU (public)."""

from __future__ import annotations

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
        "vi": "time_matmul() trả về {got} cho một matmul {n}×{n} trên CPU, vốn chỉ mất vài mili giây: hãy trả về "
              "giây (không phải mili giây), là hiệu của time.time() hoặc time.perf_counter().",
        "en": "time_matmul() returned {got} for one {n}×{n} matmul on the CPU, which takes a few milliseconds: "
              "return seconds (not milliseconds), as a difference of time.time() or time.perf_counter().",
    },
}
# A 512x512 float32 matmul on this 2-core CPU: 2.5 ms warm, 7 ms cold, 10 ms at load 4.5
# (measured; a grading draws 384-640, and 640 costs 2x 512's). Anything from 0 to 1 s is a time in
# seconds; a time in milliseconds reads >= 1, so a learner who returns ms is caught either way.
MAX_SECONDS = 1.0


def test_time_matmul_returns_seconds(ex2: LearnerModule, cpu: torch.device, draw: Draw) -> None:
    seconds = seconds_of(ex2.time_matmul(draw.matmul_n, cpu, repeats=2))
    if not seconds < MAX_SECONDS:
        fail("ex2.implausible_seconds", got=seconds, n=draw.matmul_n)
