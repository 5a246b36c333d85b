# mistake: imports is_available by name and never asks for MPS: a Mac gets the CPU
# fails: ex1.pick_device_uses_mps
# message: ex1.ignores_mps
"""Bài tập 1: `from torch.cuda import is_available`, without the MPS branch."""

from torch import device as Device
from torch.cuda import device_count, get_device_capability, get_device_name, get_device_properties, is_available


def pick_device() -> Device:
    return Device("cuda" if is_available() else "cpu")


def describe_device(device: Device) -> dict[str, object]:
    if device.type != "cuda":
        return {"type": device.type, "name": "CPU", "count": 1, "capability": None, "total_memory_bytes": None}
    return {
        "type": "cuda",
        "name": get_device_name(device),
        "count": device_count(),
        "capability": tuple(get_device_capability(device)),
        "total_memory_bytes": get_device_properties(device).total_memory,
    }
