# idiom: karpathy/nanochat — reference logic of the lesson (this style's point is in ex1_device, ex2_timing and ex4_oom)
# source: https://github.com/karpathy/nanochat/blob/master/scripts/base_train.py
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
