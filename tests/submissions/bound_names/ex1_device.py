"""Bài tập 1, bound-names style: every torch function imported by name at the top.

`from torch.cuda import is_available` binds the function when the file is imported, so the
grader must reach these names too, not only `torch.cuda.is_available`.
"""

from torch import device as Device
from torch.backends.mps import is_available as mps_is_available
from torch.cuda import device_count, get_device_capability, get_device_name, get_device_properties
from torch.cuda import is_available as cuda_is_available


def pick_device() -> Device:
    if cuda_is_available():
        return Device("cuda")
    if mps_is_available():
        return Device("mps")
    return Device("cpu")


def describe_device(device: Device) -> dict[str, object]:
    if device.type != "cuda":
        name = "Apple GPU" if device.type == "mps" else "CPU"
        return {"type": device.type, "name": name, "count": 1, "capability": None, "total_memory_bytes": None}
    return {
        "type": "cuda",
        "name": get_device_name(device),
        "count": device_count(),
        "capability": tuple(get_device_capability(device)),
        "total_memory_bytes": get_device_properties(device).total_memory,
    }
