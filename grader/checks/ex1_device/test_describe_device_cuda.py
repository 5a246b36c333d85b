"""ex1.describe_device_cuda: name, count, capability and total memory from torch.cuda (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex1_device.common import check_common, expect
from grader.judge.api import Device, LearnerModule

HINT = {
    "vi": "Đọc lại mục \"Kiểm tra GPU\": get_device_name, get_device_capability, get_device_properties.",
    "en": "Reread \"Kiểm tra GPU\": get_device_name, get_device_capability, get_device_properties.",
}


def test_describe_device_cuda(ex1: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cuda"):
        with dev:
            info = ex1.describe_device(dev.device)
        facts = dev.cuda_facts()  # the real GPU's, found before the learner's code ran, or the stand-in's
        expected_name, expected_cap, expected_total, expected_count = (facts.name, facts.capability,
                                                                       facts.total_memory, facts.count)
        check_common(info, dev.device)
        expect(info, "name", info.get("name") == expected_name, repr(expected_name))
        cap = info.get("capability")
        expect(info, "capability",
               isinstance(cap, tuple) and len(cap) == 2 and all(type(v) is int for v in cap) and cap == expected_cap,
               f"{expected_cap!r} (tuple of two ints)")
        total = info.get("total_memory_bytes")
        expect(info, "total_memory_bytes", type(total) is int and total == expected_total, f"{expected_total} (int)")
        expect(info, "count", type(info.get("count")) is int and info.get("count") == expected_count,
               str(expected_count))
