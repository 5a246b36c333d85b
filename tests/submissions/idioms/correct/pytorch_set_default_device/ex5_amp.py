# idiom: torch.set_default_device(DEVICE) at the start of training, never unset (yashbelhe/ASD python/utils/device.py)
# source: https://github.com/yashbelhe/ASD/blob/c5ba5b6da6d9d9b07dfb16fdbd0e163fd3846b60/python/utils/device.py
# shows: train_steps makes its device the default before it moves the model and data and builds the optimizer, and leaves it set — on the CPU, then on each device in turn: full marks
"""Bài tập 5 — mixed precision, sau torch.set_default_device(device)."""

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    torch.set_default_device(device)
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
