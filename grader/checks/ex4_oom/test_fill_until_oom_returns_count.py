"""ex4.fill_until_oom_returns_count: the OOM is caught and every chunk that fit is counted (public)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.budget import CHUNK_MB, fill_devices, run_fill
from grader.judge.api import Device, LearnerModule, MiB, fail

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
        "vi": "fill_until_oom() trả về {got}, nhưng có {expected} khối {chunk_mb} MiB vừa bộ nhớ: đếm mọi khối cấp "
              "phát được trước khi OOM.",
        "en": "fill_until_oom() returned {got}, but {expected} chunks of {chunk_mb} MiB fit: count every chunk "
              "allocated before the OOM.",
    },
}


def test_fill_until_oom_returns_count(ex4: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in fill_devices(devices):
        with dev:
            expected = dev.fill_capacity(CHUNK_MB * MiB)  # CHUNKS_THAT_FIT on a stand-in
            count, _ = run_fill(ex4, dev)
        if not isinstance(count, int) or isinstance(count, bool):
            fail("ex4.count_not_int", device=dev.label, got=type(count).__name__)
        if not expected - 1 <= count <= expected:
            fail("ex4.wrong_count", device=dev.label, got=count, expected=expected, chunk_mb=CHUNK_MB)
