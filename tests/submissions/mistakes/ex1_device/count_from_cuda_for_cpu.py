# mistake: describe_device always uses torch.cuda.device_count() for count, so a CPU device gets the number of GPUs instead of 1
# fails: ex1.describe_device_cpu, ex1.describe_device_mps
# message: ex1.describe_field
"""Bài tập 1, kiểu code trong bài học."""

import torch


def pick_device():
    """Chọn device: cuda → mps → cpu."""
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    return device


def describe_device(device):
    """Mô tả device. / Describe the device."""
    info = {
        "type": device.type,
        "name": "CPU",
        "count": torch.cuda.device_count(),
        "capability": None,
        "total_memory_bytes": None,
    }
    if device.type == "cuda":
        info["name"] = torch.cuda.get_device_name(device)
        info["capability"] = torch.cuda.get_device_capability(device)
        info["total_memory_bytes"] = torch.cuda.get_device_properties(
            device
        ).total_memory
    elif device.type == "mps":
        info["name"] = "Apple Silicon GPU (MPS)"
    return info
