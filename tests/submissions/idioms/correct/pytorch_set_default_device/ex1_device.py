# idiom: torch.set_default_device — reference logic of the lesson (this style's point is in ex2_timing, ex4_oom and ex5_amp)
# source: https://github.com/yashbelhe/ASD/blob/c5ba5b6da6d9d9b07dfb16fdbd0e163fd3846b60/python/utils/device.py
# shows: the plain device-agnostic lesson code beside the idiom files still gets full marks
"""Bài tập 1 — chọn device và mô tả device."""

import platform

import torch


def pick_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"type": "cuda", "name": torch.cuda.get_device_name(device), "count": torch.cuda.device_count(),
                "capability": (props.major, props.minor), "total_memory_bytes": int(props.total_memory)}
    name = "Apple GPU (MPS)" if device.type == "mps" else (platform.processor() or platform.machine() or "cpu")
    return {"type": device.type, "name": name, "count": 1, "capability": None, "total_memory_bytes": None}
