# idiom: torch.set_default_device — reference logic of the lesson (this style's point is in ex2_timing, ex4_oom and ex5_amp)
# source: https://github.com/yashbelhe/ASD/blob/c5ba5b6da6d9d9b07dfb16fdbd0e163fd3846b60/python/utils/device.py
# shows: the plain device-agnostic lesson code beside the idiom files still gets full marks
"""Bài tập 3 — CPU → device → CPU."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    y = x.to(device)
    y = y * 2 + 1
    return y.to("cpu", dtype=x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()
