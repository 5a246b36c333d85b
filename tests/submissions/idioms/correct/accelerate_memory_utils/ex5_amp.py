# idiom: Hugging Face accelerate — accelerate/utils/modeling.py "get_mixed_precision_context_manager", "get_grad_scaler" + accelerator.py "Accelerator.autocast/backward"
# source: https://github.com/huggingface/accelerate/blob/main/src/accelerate/utils/modeling.py
# shows: autocast and GradScaler reached through an Accelerator-like object (prepare, autocast(), backward(loss), step): full marks
"""Bài tập 5, kiểu accelerate: Accelerator.autocast(), Accelerator.backward()."""

import contextlib

import torch
from torch import nn


def get_mixed_precision_context_manager(device, mixed_precision):
    if mixed_precision == "fp16":
        return torch.autocast(device_type=device.type, dtype=torch.float16)
    if mixed_precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def get_grad_scaler(device, **kwargs):
    return torch.amp.GradScaler(device.type, **kwargs)


class MiniAccelerator:
    def __init__(self, device, mixed_precision="no"):
        self.device = device
        self.mixed_precision = mixed_precision
        self.scaler = get_grad_scaler(device) if mixed_precision == "fp16" else None

    def prepare(self, model, *tensors):
        return (model.to(self.device), *(t.to(self.device) for t in tensors))

    def autocast(self):
        return get_mixed_precision_context_manager(self.device, self.mixed_precision)

    def backward(self, loss):
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def optimizer_step(self, optimizer):
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()


_MODES = {None: "no", torch.float16: "fp16", torch.bfloat16: "bf16"}


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    accelerator = MiniAccelerator(device, mixed_precision=_MODES[amp_dtype])
    model, inputs, targets = accelerator.prepare(model, inputs, targets)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with accelerator.autocast():
            loss = criterion(model(inputs), targets)
        accelerator.backward(loss)
        accelerator.optimizer_step(optimizer)
        losses.append(loss.item())
    return losses
