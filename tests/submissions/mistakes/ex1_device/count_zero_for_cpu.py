# mistake: describe_device reports count 0 for a non-CUDA device ("no GPU, so zero") instead of 1
# fails: ex1.describe_device_cpu, ex1.describe_device_mps
# message: ex1.describe_field
"""Bài tập 1 — chọn device và mô tả device."""

import platform

import torch


def pick_device() -> torch.device:
    """Chọn device: cuda → mps → cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


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
        "count": 0,
        "capability": None,
        "total_memory_bytes": None,
    }
