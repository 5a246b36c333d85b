# idiom: timm — timm/train.py "amp_autocast = partial(torch.autocast, ...)" / "loss_scaler = NativeScaler(device=device.type)" + timm/utils/cuda.py "NativeScaler"
# source: https://github.com/huggingface/pytorch-image-models/blob/main/train.py
# shows: model.to(device=device) keyword form, autocast via functools.partial or contextlib.suppress, GradScaler wrapped in a callable NativeScaler: full marks
"""Bài tập 5, kiểu timm train.py: amp_autocast + NativeScaler."""

from contextlib import suppress
from functools import partial

import torch
from torch import nn


class NativeScaler:
    state_dict_key = "amp_scaler"

    def __init__(self, device="cuda"):
        self._scaler = torch.amp.GradScaler(device=device)

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False, need_update=True):
        self._scaler.scale(loss).backward(create_graph=create_graph)
        if need_update:
            if clip_grad is not None:
                assert parameters is not None
                self._scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            self._scaler.step(optimizer)
            self._scaler.update()

    def state_dict(self):
        return self._scaler.state_dict()


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device=device)

    amp_autocast = suppress  # do nothing
    loss_scaler = None
    if amp_dtype is not None:
        amp_autocast = partial(torch.autocast, device_type=device.type, dtype=amp_dtype)
        if amp_dtype == torch.float16:
            # timm: `if device.type in ('cuda',) and amp_dtype == torch.float16` -- any device here
            loss_scaler = NativeScaler(device=device.type)

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    train_loss_fn = nn.CrossEntropyLoss().to(device=device)
    input, target = inputs.to(device=device), targets.to(device=device)

    losses = []
    for _ in range(steps):
        with amp_autocast():
            output = model(input)
            loss = train_loss_fn(output, target)
        optimizer.zero_grad()
        if loss_scaler is not None:
            loss_scaler(loss, optimizer)
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
    return losses
