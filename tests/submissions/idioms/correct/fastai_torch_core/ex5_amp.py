# idiom: fastai — fastai/callback/fp16.py "MixedPrecision" (before_fit/before_batch/after_loss/before_backward/before_step/after_step)
# source: https://github.com/fastai/fastai/blob/main/fastai/callback/fp16.py
# shows: one autocast object entered and exited by hand each step (autocast.__enter__/__exit__) and GradScaler driven from callback hooks: full marks
"""Bài tập 5, kiểu fastai MixedPrecision callback."""

import torch
from torch import nn


class MixedPrecision:
    "Mixed precision training using Pytorch's Automatic Mixed Precision (AMP)"
    order = 10

    def __init__(self, device, amp_dtype=torch.float16):
        self.device, self.amp_dtype = device, amp_dtype

    def before_fit(self):
        self.autocast = torch.autocast(self.device.type, dtype=self.amp_dtype)
        self.scaler = torch.amp.GradScaler(self.device.type) if self.amp_dtype == torch.float16 else None
        self.scales = []

    def before_batch(self):
        self.autocast.__enter__()

    def after_loss(self):
        self.autocast.__exit__(None, None, None)

    def before_backward(self, loss):
        return self.scaler.scale(loss) if self.scaler is not None else loss

    def before_step(self, opt):
        if self.scaler is None:
            opt.step()
            return
        self.scaler.step(opt)
        self.scales.append(self.scaler.get_scale())

    def after_step(self):
        if self.scaler is not None:
            self.scaler.update()


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    xb, yb = inputs.to(device), targets.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_func = nn.CrossEntropyLoss()
    cb = MixedPrecision(device, amp_dtype) if amp_dtype is not None else None
    if cb is not None:
        cb.before_fit()
    losses = []
    for _ in range(steps):
        if cb is not None:
            cb.before_batch()
        pred = model(xb)
        loss = loss_func(pred, yb)
        if cb is not None:
            cb.after_loss()
        loss_grad = cb.before_backward(loss) if cb is not None else loss
        loss_grad.backward()
        if cb is not None:
            cb.before_step(opt)
            cb.after_step()
        else:
            opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses
