# mistake: ignores amp_dtype entirely: always a plain FP32 loop, no autocast, no GradScaler
# fails: ex5.bf16_uses_autocast, ex5.fp16_uses_grad_scaler, ex5.amp_saves_memory
# message: ex5.no_autocast
"""Bài tập 5 — mixed precision."""

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    """Train model `steps` bước, trả về loss từng bước."""
    model.to(device)
    inputs = inputs.to(device)
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    losses: list[float] = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        out = model(inputs)
        loss = loss_fn(out, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
