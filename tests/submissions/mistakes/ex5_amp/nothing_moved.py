# mistake: never moves anything to the device (no model.to(device), no inputs/targets .to(device)), so training runs on the CPU, where autocast(device_type="cuda") casts nothing (as on a real GPU): no 16-bit either
# fails: ex5.moves_model_and_data, ex5.bf16_uses_autocast, ex5.fp16_uses_grad_scaler, ex5.amp_saves_memory
# message: ex5.model_not_moved
"""Bài tập 5 — mixed precision."""

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    """Train model `steps` bước, trả về loss từng bước."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    use_scaler = amp_dtype == torch.float16
    scaler = torch.amp.GradScaler(device.type, enabled=use_scaler)
    losses: list[float] = []
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
        losses.append(loss.item())
    return losses
