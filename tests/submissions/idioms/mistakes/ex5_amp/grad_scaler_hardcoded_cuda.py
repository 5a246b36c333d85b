# mistake: the GradScaler is built with the lesson's GradScaler("cuda") while autocast follows device.type: on a machine without CUDA the scaler disables itself ("GradScaler is enabled, but CUDA is not available. Disabling.") and scale()/step()/update() do nothing
# fails: ex5.fp16_uses_grad_scaler
# message: ex5.scaler_disabled
# idiom: Stability-AI/stable-audio-3 PR #68 ("autocast(\"cuda\") and GradScaler(\"cuda\") are silent no-ops"); mlfoundations/open_clip PR #654 warnings
# source: https://github.com/Stability-AI/stable-audio-3/pull/68
"""Bài tập 5 — GradScaler("cuda") như trong bài, autocast theo device.type."""

import contextlib

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
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
