"""Bài tập 3, modern style: `torch.as_tensor(device=...)`, `numpy(force=True)`."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """x -> device, x * 2 + 1 there, back to the CPU in x's dtype."""
    on_device = torch.as_tensor(x, device=device)
    return (on_device * 2 + 1).to(device="cpu", dtype=x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Any device, with or without grad."""
    return t.numpy(force=True)
