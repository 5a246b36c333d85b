# idiom: skorch — skorch/utils.py "to_tensor", "to_device", "to_numpy" (with PR #884's is_mps branch)
# source: https://github.com/skorch-dev/skorch/blob/master/skorch/utils.py
# shows: to_numpy that moves cuda and mps tensors with explicit is_cuda / is_mps checks, then detaches: full marks
"""Bài tập 3, kiểu skorch.utils: to_tensor, to_device, to_numpy."""

from collections.abc import Mapping

import numpy as np
import torch
from torch.nn.utils.rnn import PackedSequence


def to_device(X, device):
    if device is None:
        return X
    if isinstance(X, Mapping):
        return type(X)({key: to_device(val, device) for key, val in X.items()})
    if isinstance(X, (tuple, list)) and (type(X) != PackedSequence):  # noqa: E721
        return type(X)(to_device(x, device) for x in X)
    if isinstance(X, torch.distributions.distribution.Distribution):
        return X
    return X.to(device)


def to_tensor(X, device):
    if isinstance(X, torch.Tensor):
        return to_device(X, device)
    if isinstance(X, Mapping):
        return {key: to_tensor(val, device) for key, val in X.items()}
    if isinstance(X, (list, tuple)):
        return [to_tensor(x, device) for x in X]
    if np.isscalar(X):
        return torch.as_tensor(X, device=device)
    if isinstance(X, np.ndarray):
        return torch.as_tensor(X, device=device)
    raise TypeError(f"Cannot convert this data type to a torch tensor: {type(X)}")


def to_numpy(X):
    if isinstance(X, np.ndarray):
        return X
    if isinstance(X, Mapping):
        return {key: to_numpy(val) for key, val in X.items()}
    if isinstance(X, (tuple, list)):
        return type(X)(to_numpy(x) for x in X)
    if not isinstance(X, (torch.Tensor, PackedSequence)):
        raise TypeError("Cannot convert this data type to a numpy array.")
    if X.is_cuda:
        X = X.cpu()
    if hasattr(X, "is_mps") and X.is_mps:
        X = X.cpu()
    if X.requires_grad:
        X = X.detach()
    return X.numpy()


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    Xt = to_tensor(x, device=device)
    y = Xt * 2 + 1
    return to_device(y, "cpu")
