# idiom: PyTorch docs (CUDA semantics) — PyTorch docs notes/cuda.rst "Device-agnostic code" (torch.empty(..., device=args.device), *_like / new_* creation)
# source: https://docs.pytorch.org/docs/stable/notes/cuda.html#device-agnostic-code
# shows: tensors created with empty_like(x, device=...) and filled with copy_() both ways (no .to() at all): full marks
"""Bài tập 3, kiểu CUDA semantics: empty_like(device=...) + copy_()."""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    x_dev = torch.empty_like(x, device=device)
    x_dev.copy_(x)
    y_dev = x_dev * 2 + 1
    y_cpu = torch.empty_like(x)  # same dtype as x, on the CPU
    y_cpu.copy_(y_dev)
    return y_cpu


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu").numpy()
