# mistake: pick_device returns the strings "cuda" / "mps" / "cpu" instead of torch.device objects
# fails: ex1.pick_device_returns_device, ex1.pick_device_prefers_cuda, ex1.pick_device_uses_mps, ex1.pick_device_falls_back_to_cpu
# message: ex1.not_a_device
"""Bài tập 1 — chọn device và mô tả device."""

import platform

import torch


def pick_device():
    """Chọn device: cuda → mps → cpu."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def describe_device(device: torch.device) -> dict:
    """Mô tả device bằng một dict 5 khóa."""
    if device.type == "cuda":
        return {
            "type": device.type,
            "name": torch.cuda.get_device_name(device),
            "count": torch.cuda.device_count(),
            "capability": torch.cuda.get_device_capability(device),
            "total_memory_bytes": torch.cuda.get_device_properties(device).total_memory,
        }
    if device.type == "mps":
        name = "Apple MPS"
    else:
        name = platform.processor() or platform.machine() or "cpu"
    return {
        "type": device.type,
        "name": name,
        "count": 1,
        "capability": None,
        "total_memory_bytes": None,
    }
