# mistake: uses the deprecated, CUDA-only torch.cuda.amp.autocast() and GradScaler() instead of torch.amp (no AMP on the CPU or MPS)
# fails: ex5.modern_amp_api, ex5.fp16_uses_grad_scaler, ex5.bf16_uses_autocast, ex5.amp_saves_memory
# message: ex5.deprecated_amp
"""Bài tập 5, kiểu code trong bài học."""

import torch
from torch import nn
from torch.cuda.amp import GradScaler, autocast


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    """FP32 / FP16 (autocast + GradScaler) / BF16 (autocast)."""
    model = model.to(device)
    inputs = inputs.to(device)
    targets = targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = GradScaler() if amp_dtype == torch.float16 else None

    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        if amp_dtype is None:
            out = model(inputs)
            loss = loss_fn(out, targets)
            loss.backward()
            optimizer.step()
        else:
            with autocast(dtype=amp_dtype):
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
