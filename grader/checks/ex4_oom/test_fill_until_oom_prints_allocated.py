"""ex4.fill_until_oom_prints_allocated: it prints the allocated memory when the OOM happens (hidden)."""

from __future__ import annotations

import re
from collections.abc import Callable

from grader.checks.ex4_oom.budget import fill_devices, run_fill
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại mục bộ nhớ: memory_allocated.",
    "en": "Reread \"Memory\": memory_allocated.",
}
MESSAGES = {
    "ex4.no_print": {
        "vi": "fill_until_oom() không in gì: in bộ nhớ đang cấp phát lúc OOM (torch.cuda.memory_allocated()).",
        "en": "fill_until_oom() printed nothing: print the allocated memory when the OOM happens "
              "(torch.cuda.memory_allocated()).",
    },
}


def test_fill_until_oom_prints_allocated(ex4: LearnerModule, devices: Callable[..., list[Device]],
                                         draw: Draw) -> None:
    for dev in fill_devices(devices, draw):
        with dev:
            run_fill(ex4, dev, draw)
        if not re.search(r"\d", dev.printed):
            fail("ex4.no_print", device=dev.label)
