# idiom: karpathy/nanochat — reference logic of the lesson (this style's point is in ex1_device, ex2_timing and ex4_oom)
# source: https://github.com/karpathy/nanochat/blob/master/scripts/base_train.py
# shows: the plain device-agnostic lesson code beside the idiom files still gets full marks
"""Bài tập 5 — mixed precision: autocast + GradScaler."""

import contextlib

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        ctx = torch.autocast(device_type=device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
        with ctx:
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
