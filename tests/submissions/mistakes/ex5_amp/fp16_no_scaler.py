# mistake: float16 autocast without a GradScaler: plain loss.backward() and optimizer.step() for every dtype
# fails: ex5.fp16_uses_grad_scaler
# message: ex5.fp16_no_scaler
"""Bài tập 5, kiểu code trong bài học."""

import torch
from torch import nn
from torch.amp import autocast


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    """FP32 / FP16 / BF16 (autocast)."""
    model = model.to(device)
    inputs = inputs.to(device)
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()

    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with autocast(device_type=device.type, dtype=amp_dtype or torch.float32,
                      enabled=amp_dtype is not None):
            out = model(inputs)
            loss = loss_fn(out, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
