# mistake: pick_device() asks torch.backends.mps.is_built() (the old torch.has_mps) instead of is_available(): on a Mac build where MPS cannot run (macOS < 12.3, a VM, an unsupported GPU) it returns mps and every later .to(device) fails
# fails: ex1.pick_device_falls_back_to_cpu
# message: ex1.hardcoded_cuda
# idiom: jeffheaton/app_deep_learning (`has_mps = torch.backends.mps.is_built()`); fastai torch_core._has_mps falls back to torch.has_mps (= is_built)
# source: https://github.com/jeffheaton/app_deep_learning/issues/2
"""Bài tập 1 — chọn device: has_mps = is_built()."""

import platform

import torch


def pick_device() -> torch.device:
    has_mps = torch.backends.mps.is_built()
    if torch.cuda.is_available():
        return torch.device("cuda")
    if has_mps:
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
