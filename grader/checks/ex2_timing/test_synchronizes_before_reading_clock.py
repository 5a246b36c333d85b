"""ex2.synchronizes_before_reading_clock: the device is idle at both reads of the measured
interval — GPU work is asynchronous, the lesson's headline timing mistake (public).

On a stand-in the virtual timeline knows whether the device had finished at each clock read,
however the learner synchronized (``torch.cuda`` / ``torch.mps`` / ``torch.accelerator``
``.synchronize()``, an event's, ``.item()``); on a real GPU an explicit synchronize must come
between the last matmul and the read. Two CUDA/MPS events time on the device itself, and
``elapsed_time`` refuses an unsynchronized end, so they need nothing more here.
"""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex2_timing.common import SMALLER, device_matmuls, interval_of, timed
from grader.judge.api import Device, Event, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại đoạn \"Vì sao cần torch.cuda.synchronize()\".",
    "en": "Reread \"Vì sao cần torch.cuda.synchronize()\".",
}
MESSAGES = {
    "ex2.no_sync_before_stop": {
        "vi": "Đồng hồ dừng trước khi GPU tính xong: op trên GPU chạy bất đồng bộ, nên gọi synchronize() của device "
              "(torch.cuda.synchronize(), torch.mps.synchronize() hay torch.accelerator.synchronize()) sau matmul "
              "cuối và TRƯỚC khi đọc đồng hồ. Không có nó bạn chỉ đo thời gian enqueue kernel.",
        "en": "The clock stopped before the GPU finished: GPU ops are asynchronous, so call the device's "
              "synchronize() (torch.cuda.synchronize(), torch.mps.synchronize() or "
              "torch.accelerator.synchronize()) after the last matmul and BEFORE reading the clock. Without it you "
              "time only the kernel launches.",
    },
    "ex2.no_sync_before_start": {
        "vi": "Đồng hồ bắt đầu khi warm-up vẫn đang chạy trên GPU: gọi synchronize() cả trước khi đọc thời điểm "
              "bắt đầu.",
        "en": "The clock started while the warm-up was still running on the GPU: call synchronize() before "
              "reading the start time too.",
    },
}


def _idle_at(events: list[Event], read: int, dev: Device) -> bool:
    drained = events[read].drained
    if drained is not None:  # a stand-in knows
        return drained
    before = [i for i in device_matmuls(events, dev) if i < read]
    return not before or any(e.kind == "sync" for e in events[before[-1]:read])


def test_synchronizes_before_reading_clock(ex2: LearnerModule, devices: Callable[..., list[Device]],
                                          draw: Draw) -> None:
    for dev in devices("cuda", "mps", virtual_clock=True, smaller=SMALLER):
        with dev:
            seconds, events = timed(ex2, dev, draw.matmul_n)
        interval = interval_of(events, seconds, dev)
        if interval is None or interval.device_clock:
            continue
        if not _idle_at(events, interval.stop, dev):
            fail("ex2.no_sync_before_stop", device=dev.label)
        if not _idle_at(events, interval.start, dev):
            fail("ex2.no_sync_before_start", device=dev.label)
