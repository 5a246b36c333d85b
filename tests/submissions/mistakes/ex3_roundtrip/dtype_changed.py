# mistake: converts the result to float32 on the way back (.float()), so integer / float64 / float16 inputs change dtype
# fails: ex3.roundtrip_keeps_dtype
# message: ex3.dtype_changed
"""Bài tập 3 — CPU → device → CPU."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Chuyển x sang device, tính x * 2 + 1 trên đó, trả kết quả về CPU."""
    y = x.to(device)
    y = y * 2 + 1
    return y.cpu().float()


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Đổi tensor sang NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
