# idiom: karpathy/nanochat — scripts/base_train.py: `device_type = autodetect_device_type()` (nanochat/common.py) once, at the top of the script, as the lesson's "device-agnostic" block sets `device` once and uses it everywhere
# source: https://github.com/karpathy/nanochat/blob/master/scripts/base_train.py
# shows: pick_device() returns the device chosen when the module was imported: on each machine (a GPU, a Mac, a CPU) the module is imported there, so the answer is that machine's: full marks
"""Bài tập 1, kiểu nanochat: device_type chọn một lần khi import."""

import platform

import torch


def autodetect_device_type():
    # prefer CUDA, then MPS, then the CPU
    if torch.cuda.is_available():
        device_type = "cuda"
    elif torch.backends.mps.is_available():
        device_type = "mps"
    else:
        device_type = "cpu"
    print(f"Autodetected device type: {device_type}")
    return device_type


device_type = autodetect_device_type()
device = torch.device(device_type)


def pick_device() -> torch.device:
    return device


def describe_device(device: torch.device) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "type": device.type,
            "name": torch.cuda.get_device_name(device),
            "count": torch.cuda.device_count(),
            "capability": tuple(torch.cuda.get_device_capability(device)),
            "total_memory_bytes": int(props.total_memory),
        }
    name = "Apple GPU (MPS)" if device.type == "mps" else (platform.processor() or platform.machine() or "cpu")
    return {"type": device.type, "name": name, "count": 1, "capability": None, "total_memory_bytes": None}
