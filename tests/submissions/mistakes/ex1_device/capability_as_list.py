# mistake: describe_device returns the compute capability as a list [major, minor] instead of a tuple
# fails: ex1.describe_device_cuda
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
        "count": 1,
        "capability": None,
        "total_memory_bytes": None,
    }
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        info["name"] = torch.cuda.get_device_name(device)
        info["count"] = torch.cuda.device_count()
        info["capability"] = [major, minor]
        info["total_memory_bytes"] = torch.cuda.get_device_properties(
            device
        ).total_memory
    elif device.type == "mps":
        info["name"] = "Apple Silicon GPU (MPS)"
    return info
