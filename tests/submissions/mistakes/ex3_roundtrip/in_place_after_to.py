# mistake: x = x.to(device) then in-place x.mul_(2).add_(1): when x is already on that device .to() returns x itself, so the caller's tensor is modified
# fails: ex3.roundtrip_input_unchanged
# message: ex3.input_modified
"""Bài tập 3 — CPU → device → CPU."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Chuyển x sang device, tính x * 2 + 1 trên đó, trả kết quả về CPU."""
    x = x.to(device)
    x.mul_(2).add_(1)  # in-place: saves memory on the GPU
    return x.to("cpu", dtype=x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Đổi tensor sang NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
