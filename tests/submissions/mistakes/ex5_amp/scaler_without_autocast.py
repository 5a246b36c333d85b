# mistake: uses a GradScaler for float16 but never wraps the forward pass in autocast, so everything still runs in FP32
# fails: ex5.bf16_uses_autocast, ex5.fp16_uses_grad_scaler, ex5.amp_saves_memory
# message: ex5.no_autocast
"""Bài tập 5, kiểu code trong bài học."""

import torch
from torch import nn
from torch.amp import GradScaler


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    """FP32 / FP16 (GradScaler) / BF16."""
    model = model.to(device)
    inputs = inputs.to(device)
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = GradScaler(device.type) if amp_dtype == torch.float16 else None

    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        out = model(inputs)
        loss = loss_fn(out, targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
    return losses
