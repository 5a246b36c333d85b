# mistake: timm train.py creates the loss scaler only `if device.type in ('cuda',) and amp_dtype == torch.float16`: float16 autocast on mps (or cpu) runs with no GradScaler
# fails: ex5.fp16_uses_grad_scaler
# message: ex5.fp16_no_scaler
# idiom: timm train.py (`if device.type in ('cuda',) and amp_dtype == torch.float16: loss_scaler = NativeScaler(device=device.type)`); gudbrandtandberg/ChessVision-3LC PR #9 ("enable GradScaler only for CUDA")
# source: https://github.com/huggingface/pytorch-image-models/blob/main/train.py
"""Bài tập 5 — kiểu timm train.py: loss scaler chỉ cho cuda."""

import contextlib

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = None
    if amp_dtype is not None and device.type in ("cuda",) and amp_dtype == torch.float16:
        # loss scaler only used for float16 (half) dtype, bfloat16 does not need it
        scaler = torch.amp.GradScaler(device.type)
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
