# idiom: torch.accelerator (torch.Event, torch.accelerator.synchronize) — reference logic of the lesson (this style's point is in ex2_timing)
# source: https://docs.pytorch.org/docs/stable/generated/torch.Event.html
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
