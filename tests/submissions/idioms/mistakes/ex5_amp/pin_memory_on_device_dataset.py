# mistake: train_steps moves the whole dataset to the device first and then hands it to a DataLoader(pin_memory=True), as the performance guides advise: pinning a tensor already on the GPU raises "cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned"
# fails: ex5.fp32_losses, ex5.fp16_uses_grad_scaler, ex5.bf16_uses_autocast, ex5.modern_amp_api, ex5.moves_model_and_data, ex5.amp_saves_memory
# message: pin_off_cpu
# idiom: a dataset put on the GPU behind DataLoader(pin_memory=True) (unit8co/darts#436, DavidWBressler/GCNN#2, scverse/scvi-tools#1713)
# source: https://github.com/unit8co/darts/issues/436
"""Bài tập 5 — dữ liệu đã ở GPU rồi còn pin_memory=True."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    dataset = TensorDataset(inputs.to(device), targets.to(device))
    loader = DataLoader(dataset, batch_size=len(inputs), pin_memory=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    losses = []
    for _ in range(steps):
        for xb, yb in loader:
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32,
                                enabled=amp_dtype is not None):
                loss = loss_fn(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
    return losses
