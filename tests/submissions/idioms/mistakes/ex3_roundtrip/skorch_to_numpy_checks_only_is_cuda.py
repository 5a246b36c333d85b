# mistake: skorch's to_numpy() before PR #884 moves a tensor to the CPU only `if X.is_cuda`: an mps tensor reaches .numpy() and raises "can't convert mps:0 device type tensor to numpy"
# fails: ex3.to_numpy_grad_and_device
# message: ex3.numpy_on_device
# idiom: skorch/utils.py to_numpy (skorch-dev/skorch issue #883, fixed by PR #884)
# source: https://github.com/skorch-dev/skorch/issues/883
"""Bài tập 3 — kiểu skorch.utils.to_numpy, bản trước PR #884."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    y = x.to(device)
    y = y * 2 + 1
    return y.to("cpu", dtype=x.dtype)


def to_numpy(X):
    if isinstance(X, np.ndarray):
        return X
    if X.is_cuda:
        X = X.cpu()
    if X.requires_grad:
        X = X.detach()
    return X.numpy()
