# mistake: model.half() / model.bfloat16() instead of autocast and no GradScaler: pure 16-bit training (its float16 losses turn to nan; bfloat16 trains, but in 16-bit weights)
# fails: ex5.bf16_uses_autocast, ex5.fp16_uses_grad_scaler
# message: ex5.model_cast
"""Bài tập 5: model.half() thay cho autocast."""

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    if amp_dtype == torch.float16:
        model.half()
    elif amp_dtype == torch.bfloat16:
        model.bfloat16()
    inputs = inputs.to(device)
    targets = targets.to(device)
    if amp_dtype is not None:
        inputs = inputs.to(amp_dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
