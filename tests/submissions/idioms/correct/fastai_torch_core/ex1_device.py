# idiom: fastai — fastai/torch_core.py "default_device", "_has_mps", "defaults.use_cuda" (after fastai PR #3858)
# source: https://github.com/fastai/fastai/blob/main/fastai/torch_core.py
# shows: pick_device() that returns torch.device(torch.cuda.current_device()) -- cuda:0 -- and reads a module-level defaults object: full marks
"""Bài tập 1, kiểu fastai torch_core: defaults.use_cuda, default_device()."""

import platform
from types import SimpleNamespace

import torch

# fastcore's `defaults`: None -> GPU if available; True -> error if not; False -> CPU
defaults = SimpleNamespace(use_cuda=None)


def noop(x=None, *args, **kwargs):
    return x


def nested_attr(o, attr, default=None):
    try:
        for a in attr.split("."):
            o = getattr(o, a)
    except AttributeError:
        return default
    return o


def _has_mps():
    # fastai falls back to `torch.has_mps` (= is_built) here; is_available is the honest answer
    return bool(nested_attr(torch, "backends.mps.is_available", noop)())


def default_device(use=-1):
    "Return or set default device; `use_cuda`: -1 - CUDA/mps if available; True - error if not available; False - CPU"
    if use == -1:
        use = defaults.use_cuda
    else:
        defaults.use_cuda = use
    if use is None:
        if torch.cuda.is_available() or _has_mps():
            use = True
    if use:
        if torch.cuda.is_available():
            return torch.device(torch.cuda.current_device())
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
