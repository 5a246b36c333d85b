# mistake: pick_device hard-codes torch.device("cuda") without checking torch.cuda.is_available()
# fails: ex1.pick_device_falls_back_to_cpu, ex1.pick_device_uses_mps, ex1.pick_device_returns_device
# message: ex1.hardcoded_cuda
"""Bài tập 1 — chọn device và mô tả device."""

import platform

import torch


def pick_device() -> torch.device:
    """Chọn device để chạy code (Colab có GPU nên dùng cuda)."""
    return torch.device("cuda")


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
