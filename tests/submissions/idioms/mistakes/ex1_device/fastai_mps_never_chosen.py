# mistake: fastai's default_device() before PR #3858: `if use is None: if torch.cuda.is_available(): use = True` never asks _has_mps(), so a Mac with only MPS gets the CPU
# fails: ex1.pick_device_uses_mps
# message: ex1.ignores_mps
# idiom: fastai torch_core.default_device (bug fixed by fastai/fastai PR #3858, issue #3785)
# source: https://github.com/fastai/fastai/pull/3858
"""Bài tập 1 — kiểu fastai default_device(), bản trước PR #3858."""

import platform
from types import SimpleNamespace

import torch

defaults = SimpleNamespace(use_cuda=None)


def _has_mps():
    return torch.backends.mps.is_available()


def default_device(use=-1):
    "Return or set default device; `use_cuda`: -1 - CUDA/mps if available; True - error if not available; False - CPU"
    if use == -1:
        use = defaults.use_cuda
    else:
        defaults.use_cuda = use
    if use is None:
        if torch.cuda.is_available():
            use = True
    if use:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _has_mps():
            return torch.device("mps")
    return torch.device("cpu")


def pick_device() -> torch.device:
    return default_device()


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
