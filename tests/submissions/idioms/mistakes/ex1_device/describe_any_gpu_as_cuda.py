# mistake: describe_device() treats every device that is not the CPU as a CUDA GPU and calls torch.cuda.get_device_name()/get_device_properties() for mps too: on a Mac it raises AssertionError "Torch not compiled with CUDA enabled"
# fails: ex1.describe_device_mps
# message: cuda_api_off_cuda
# idiom: CUDA-only helpers called on Apple Silicon (karpathy/llm.c, spqb/adabmDCApy get_device: `if "cuda" ... torch.cuda.get_device_name(device)`)
# source: https://github.com/karpathy/llm.c/issues/73
"""Bài tập 1 — mô tả device: mọi GPU đều là CUDA."""

import platform

import torch


def pick_device() -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> dict:
    if device.type == "cpu":
        return {"type": "cpu", "name": platform.processor() or platform.machine() or "cpu", "count": 1,
                "capability": None, "total_memory_bytes": None}
    props = torch.cuda.get_device_properties(device)
    return {
        "type": device.type,
        "name": torch.cuda.get_device_name(device),
        "count": torch.cuda.device_count(),
        "capability": (props.major, props.minor),
        "total_memory_bytes": int(props.total_memory),
    }
