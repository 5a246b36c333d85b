"""ex4.fill_until_oom_returns_count: the OOM is caught and every chunk that fit is counted (public)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.budget import fill_devices, run_fill
from grader.judge.api import Device, LearnerModule, MiB, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại bài tập 4 và mục \"CUDA OOM\".",
    "en": "Reread exercise 4 and \"CUDA OOM\".",
}
MESSAGES = {
    "ex4.count_not_int": {
        "vi": "fill_until_oom() phải trả về số khối dạng int, nhận được {got}.",
        "en": "fill_until_oom() must return the number of chunks as an int, got {got}.",
    },
    "ex4.wrong_count": {
        "vi": "fill_until_oom() trả về {got}, không phải số khối {chunk_mb} MiB đã cấp phát được trước khi OOM: "
              "đếm mọi khối cấp phát thành công, và chỉ những khối đó.",
        "en": "fill_until_oom() returned {got}, which is not how many {chunk_mb} MiB chunks were allocated before "
              "the OOM: count every chunk that was allocated, and only those.",
    },
}


def test_fill_until_oom_returns_count(ex4: LearnerModule, devices: Callable[..., list[Device]],
                                      draw: Draw) -> None:
    for dev in fill_devices(devices, draw):
        with dev:
            expected = dev.fill_capacity(draw.chunk_mb * MiB)  # the judge's own figure on a stand-in
            count, _ = run_fill(ex4, dev, draw)
        if not isinstance(count, int) or isinstance(count, bool):
            fail("ex4.count_not_int", device=dev.label, got=type(count).__name__)
        if not expected - 1 <= count <= expected:
            fail("ex4.wrong_count", device=dev.label, got=count, chunk_mb=draw.chunk_mb)
