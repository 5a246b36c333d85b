# mistake: autocast is written as the lesson's torch.autocast(device_type="cuda", ...) while the model is on `device`: on mps or cpu it only warns "User provided device_type of 'cuda', but CUDA is not available. Disabling" and trains in FP32
# fails: ex5.fp16_uses_grad_scaler, ex5.bf16_uses_autocast, ex5.amp_saves_memory
# message: ex5.no_autocast
# idiom: Lightning-AI/pytorch-lightning PR #20876 (Fabric passed "cuda" to torch.autocast on mps); milesial/Pytorch-UNet issue #393
# source: https://github.com/Lightning-AI/pytorch-lightning/pull/20876
"""Bài tập 5 — autocast(device_type="cuda") cứng như trong bài."""

import contextlib

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    autocast_ctx = (torch.autocast(device_type="cuda", dtype=amp_dtype) if amp_dtype is not None
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
