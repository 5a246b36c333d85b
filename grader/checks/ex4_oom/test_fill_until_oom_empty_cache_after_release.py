"""ex4.fill_until_oom_empty_cache_after_release: empty_cache() runs, after the chunks are dropped (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.budget import fill_devices, run_fill
from grader.judge.api import Device, LearnerModule, MiB, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại mục \"Giải phóng cache\": empty_cache() giải phóng được gì và không được gì.",
    "en": "Reread \"Giải phóng cache\": what empty_cache() can and cannot free.",
}
MESSAGES = {
    "ex4.no_empty_cache": {
        "vi": "fill_until_oom() không gọi empty_cache() của device này: sau khi bỏ các tensor, trả cache về driver "
              "bằng torch.cuda.empty_cache() (cuda), torch.mps.empty_cache() (mps) hoặc "
              "torch.accelerator.empty_cache().",
        "en": "fill_until_oom() never called this device's empty_cache(): after dropping the tensors, return the "
              "cache to the driver with torch.cuda.empty_cache() (cuda), torch.mps.empty_cache() (mps) or "
              "torch.accelerator.empty_cache().",
    },
    "ex4.empty_cache_while_referenced": {
        "vi": "empty_cache() chạy khi {mib} MiB khối vẫn còn được tham chiếu: nó chỉ trả phần cache không dùng — del "
              "tensor TRƯỚC, rồi mới gọi empty_cache().",
        "en": "empty_cache() ran while {mib} MiB of chunks were still referenced: it only frees unused cache — del "
              "the tensors FIRST, then call empty_cache().",
    },
}


def test_fill_until_oom_empty_cache_after_release(ex4: LearnerModule, devices: Callable[..., list[Device]],
                                                  draw: Draw) -> None:
    for dev in fill_devices(devices, draw):
        with dev:
            baseline = dev.live_bytes()
            run_fill(ex4, dev, draw)
            calls = [e for e in dev.events if e.kind == "empty_cache"]
        if not calls:
            fail("ex4.no_empty_cache", device=dev.label)
        if all(e.live_bytes - baseline >= draw.chunk_mb * MiB for e in calls):
            fail("ex4.empty_cache_while_referenced", device=dev.label,
                 mib=f"{(calls[-1].live_bytes - baseline) / MiB:.0f}")
