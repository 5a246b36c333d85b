# mistake: returns the result still on the device (forgets .cpu() / .to("cpu"))
# fails: ex3.roundtrip_returns_cpu
# message: ex3.left_on_device
"""Bài tập 3 — CPU → device → CPU."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Chuyển x sang device, tính x * 2 + 1 trên đó, trả kết quả."""
    y = x.to(device)
    y = y * 2 + 1
    return y.to(dtype=x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Đổi tensor sang NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
