"""ex4.fill_until_oom_frees_memory: once it returns, no chunk is still alive (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.budget import fill_devices, run_fill
from grader.judge.api import Device, LearnerModule, MiB, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại nguyên nhân OOM số 4: giữ reference dư.",
    "en": "Reread cause 4 of OOM: keeping references.",
}
MESSAGES = {
    "ex4.memory_not_freed": {
        "vi": "Sau khi fill_until_oom() trả về vẫn còn {mib} MiB được cấp phát: bỏ mọi tham chiếu tới các khối (del / "
              "clear list, đừng giữ exception) trước khi return.",
        "en": "After fill_until_oom() returned, {mib} MiB were still allocated: drop every reference to the chunks "
              "(del / clear the list, do not keep the exception) before returning.",
    },
}


def test_fill_until_oom_frees_memory(ex4: LearnerModule, devices: Callable[..., list[Device]],
                                     draw: Draw) -> None:
    for dev in fill_devices(devices, draw):
        with dev:
            _, still_live = run_fill(ex4, dev, draw)
        if still_live >= draw.chunk_mb * MiB:
            fail("ex4.memory_not_freed", device=dev.label, mib=f"{still_live / MiB:.0f}")
