# idiom: pytorch/examples — reference logic of the lesson (this style's point is in ex5_amp)
# source: https://github.com/pytorch/examples/blob/main/imagenet/main.py
# shows: the plain device-agnostic lesson code beside the idiom files still gets full marks
"""Bài tập 3, kiểu tutorial pin_memory / non_blocking."""

import numpy as np
import torch


def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type == "cuda":
        x_dev = x.pin_memory().to(device, non_blocking=True)  # page-locked: the copy can overlap
    else:
        x_dev = x.to(device, non_blocking=True)
    y = x_dev * 2 + 1
    out = y.to("cpu", non_blocking=True)  # returns before the copy has landed
    _synchronize(device)  # the tutorial's rule: sync before reading a non_blocking D2H result
    return out


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.device.type == "cpu":
        return t.numpy()
    out = t.to("cpu", non_blocking=True)
    _synchronize(t.device)
    return out.numpy()
