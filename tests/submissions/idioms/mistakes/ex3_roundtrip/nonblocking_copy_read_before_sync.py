# mistake: roundtrip() brings the result back with .to("cpu", non_blocking=True) and returns it without synchronizing: on a GPU the copy has not landed yet, so the caller reads stale memory
# fails: ex3.roundtrip_values, ex3.roundtrip_keeps_dtype
# message: ex3.non_blocking_not_synced
# idiom: PyTorch tutorial "A guide on good usage of non_blocking and pin_memory()" (cuda_tensor.to("cpu", non_blocking=True) gives erroneous outputs); pytorch/pytorch issue #86264
# source: https://github.com/pytorch/pytorch/issues/86264
"""Bài tập 3 — non_blocking=True khi chép về CPU, không synchronize."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    y = x.to(device, non_blocking=True)
    y = y * 2 + 1
    return y.to("cpu", non_blocking=True)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()
