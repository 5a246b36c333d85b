# mistake: appends the loss tensor itself (losses.append(loss)) instead of loss.item()
# fails: ex5.fp32_losses
# message: ex5.loss_tensor
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
    use_scaler = amp_dtype == torch.float16
    scaler = torch.amp.GradScaler(device.type, enabled=use_scaler)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.amp.autocast(
            device_type=device.type,
            dtype=amp_dtype or torch.float32,
            enabled=amp_dtype is not None,
        ):
            out = model(inputs)
            loss = loss_fn(out, targets)
        if use_scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss)
    return losses
