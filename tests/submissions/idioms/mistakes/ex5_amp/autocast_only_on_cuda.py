# mistake: autocast (and so the GradScaler) is used only when device.type == "cuda"; every other device silently trains in FP32
# fails: ex5.fp16_uses_grad_scaler, ex5.bf16_uses_autocast, ex5.amp_saves_memory
# message: ex5.no_autocast
# idiom: karpathy/nanochat PR #319 (`device_type == "cuda"` -> `!= "cpu"`); mlfoundations/open_clip PR #654; jingyaogong/minimind PR #852
# source: https://github.com/karpathy/nanochat/pull/319
"""Bài tập 5 — autocast chỉ bật khi device là cuda."""

import contextlib

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    use_amp = amp_dtype is not None and device.type == "cuda"
    scaler = torch.amp.GradScaler(device.type) if use_amp and amp_dtype == torch.float16 else None
    autocast_ctx = (torch.autocast(device_type=device.type, dtype=amp_dtype) if use_amp
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
