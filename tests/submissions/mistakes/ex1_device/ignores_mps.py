# mistake: pick_device only checks CUDA and otherwise returns cpu, never trying Apple MPS
# fails: ex1.pick_device_uses_mps
# message: ex1.ignores_mps
"""Bài tập 1, kiểu code trong bài học."""

import torch


def pick_device():
    """Chọn device. / Pick the device."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return device


def describe_device(device):
    """Mô tả device. / Describe the device."""
    info = {
        "type": device.type,
        "name": "CPU",
        "count": 1,
        "capability": None,
        "total_memory_bytes": None,
    }
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["count"] = torch.cuda.device_count()
        info["capability"] = torch.cuda.get_device_capability(device)
        info["total_memory_bytes"] = torch.cuda.get_device_properties(
            device
        ).total_memory
    elif device.type == "mps":
        info["name"] = "Apple Silicon GPU (MPS)"
    return info
