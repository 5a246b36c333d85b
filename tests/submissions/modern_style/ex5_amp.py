"""Bài tập 5, modern style: `torch.amp.autocast` or `contextlib.nullcontext`."""

import contextlib

import torch
from torch import nn


def _autocast(
    device: torch.device, amp_dtype: torch.dtype | None
) -> contextlib.AbstractContextManager[object]:
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.amp.autocast(device.type, dtype=amp_dtype)


def train_steps(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    device: torch.device,
    steps: int = 20,
    amp_dtype: torch.dtype | None = None,
    lr: float = 1e-3,
) -> list[float]:
    """FP32, FP16 + GradScaler, or BF16."""
    model = model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with _autocast(device, amp_dtype):
            loss = loss_fn(model(inputs), targets)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        losses.append(loss.item())
    return losses
