# mistake: to_numpy calls t.detach().numpy() without .cpu(), which fails for a tensor on the GPU
# fails: ex3.to_numpy_grad_and_device
# message: ex3.numpy_on_device
"""Bài tập 3 — CPU → device → CPU."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Chuyển x sang device, tính x * 2 + 1 trên đó, trả kết quả về CPU."""
    y = x.to(device)
    y = y * 2 + 1
    return y.to("cpu", dtype=x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Đổi tensor sang NumPy."""
    return t.detach().numpy()
