# mistake: float16 mixed precision is turned off when device.type == "cpu" (accelerate: native_amp only `if mixed_precision == "fp16" and self.device.type != "cpu"`), so the CPU silently trains in FP32 although CPU autocast and GradScaler("cpu") support float16
# fails: ex5.fp16_uses_grad_scaler
# message: ex5.no_autocast
# idiom: Hugging Face accelerate accelerator.py Accelerator.__init__ (`if self.state.mixed_precision == "fp16" and self.device.type != "cpu"`)
# source: https://github.com/huggingface/accelerate/blob/main/src/accelerate/accelerator.py
"""Bài tập 5 — kiểu accelerate: fp16 trên CPU thành FP32."""

import contextlib

import torch
from torch import nn


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    native_amp = amp_dtype is not None and not (amp_dtype == torch.float16 and device.type == "cpu")
    scaler = torch.amp.GradScaler(device.type) if native_amp and amp_dtype == torch.float16 else None
    autocast_ctx = (torch.autocast(device_type=device.type, dtype=amp_dtype) if native_amp
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
