"""ex1.describe_device_keys: exactly the five keys of the contract (public)."""

from __future__ import annotations

import torch

from grader.checks.ex1_device.common import KEYS
from grader.judge.api import LearnerModule, fail, type_name

HINT = {
    "vi": "Đọc lại mục \"Kiểm tra GPU\" và docstring của bài để biết năm khóa.",
    "en": "Reread \"Kiểm tra GPU\" and the exercise's docstring for the five keys.",
}
MESSAGES = {
    "ex1.describe_keys": {
        "vi": "describe_device() phải có đúng các khóa type, name, count, capability, total_memory_bytes (thiếu: "
              "{missing}; thừa: {extra}).",
        "en": "describe_device() must have exactly the keys type, name, count, capability, total_memory_bytes "
              "(missing: {missing}; extra: {extra}).",
    },
}


def test_describe_device_keys(ex1: LearnerModule, cpu: torch.device) -> None:
    info = ex1.describe_device(cpu)
    if not isinstance(info, dict):
        fail("ex1.describe_not_dict", got=type_name(info))
    missing, extra = KEYS - set(info), set(info) - KEYS
    if missing or extra:
        fail("ex1.describe_keys", missing=", ".join(sorted(missing)) or "-",
             extra=", ".join(sorted(map(str, extra))) or "-")
