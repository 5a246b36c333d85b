# mistake: float16 is silently replaced by bfloat16 (and so no GradScaler) on every device but CUDA, as Lightning does for precision='16-mixed' on the CPU
# fails: ex5.fp16_uses_grad_scaler
# message: ex5.no_autocast
# idiom: Lightning accelerator_connector.py ("You passed `Trainer(accelerator='cpu', precision='16-mixed')` but AMP with fp16 is not supported on CPU. Using `precision='bf16-mixed'` instead.")
# source: https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/pytorch/trainer/connectors/accelerator_connector.py
"""Bài tập 5 — float16 đổi thành bfloat16 khi không phải cuda."""

import contextlib
import warnings

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    if amp_dtype == torch.float16 and device.type != "cuda":
        warnings.warn("AMP with fp16 is not supported here. Using bfloat16 instead.")
        amp_dtype = torch.bfloat16
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    autocast_ctx = (torch.autocast(device_type=device.type, dtype=amp_dtype) if amp_dtype is not None
                    else contextlib.nullcontext())
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with autocast_ctx:
            loss = loss_fn(model(inputs), targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
    return losses
