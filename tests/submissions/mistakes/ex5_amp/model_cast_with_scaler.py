# mistake: casts the model and inputs to amp_dtype instead of autocast (pure 16-bit training, as model.half() tutorials do), so the GradScaler meets float16 gradients
# fails: ex5.fp16_uses_grad_scaler, ex5.bf16_uses_autocast, ex5.modern_amp_api
# message: ex5.model_cast
"""Bài tập 5: ép kiểu model sang amp_dtype, như các tutorial model.half() cũ."""

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    dtype = amp_dtype or torch.float32
    model = model.to(device=device, dtype=dtype)
    inputs = inputs.to(device=device, dtype=dtype)
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
