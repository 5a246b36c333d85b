# idiom: fastai — fastai/torch_core.py "apply", "to_device", "to_cpu", "to_np"
# source: https://github.com/fastai/fastai/blob/main/fastai/torch_core.py
# shows: recursive apply()/to_device(b, device)/to_cpu(b) helpers and to_np() via `.data.cpu().numpy()`: full marks
"""Bài tập 3, kiểu fastai torch_core: apply, to_device, to_cpu, to_np."""

import numpy as np
import torch
from torch import Tensor

defaults_use_cuda = None  # fastai's defaults.use_cuda: False would force everything to the CPU


def is_listy(x):
    return isinstance(x, (tuple, list))


def apply(func, x, *args, **kwargs):
    "Apply `func` recursively to `x`, passing on args"
    if is_listy(x):
        return type(x)([apply(func, o, *args, **kwargs) for o in x])
    if isinstance(x, dict):
        return {k: apply(func, v, *args, **kwargs) for k, v in x.items()}
    res = func(x, *args, **kwargs)
    return res


def to_device(b, device=None, non_blocking=False):
    "Recursively put `b` on `device`."
    if defaults_use_cuda is False:
        device = "cpu"

    def _inner(o):
        if isinstance(o, Tensor):
            return o.to(device, non_blocking=non_blocking)
        return o

    return apply(_inner, b)


def to_cpu(b):
    "Recursively map tensors in `b ` to the cpu."
    return to_device(b, "cpu")


def to_np(x):
    "Convert a tensor to a numpy array."
    return apply(lambda o: o.data.cpu().numpy(), x)


def roundtrip(x: Tensor, device: torch.device) -> Tensor:
    xb = to_device(x, device)
    yb = xb * 2 + 1
    return to_cpu(yb).to(x.dtype)


def to_numpy(t: Tensor) -> np.ndarray:
    return to_np(t)
