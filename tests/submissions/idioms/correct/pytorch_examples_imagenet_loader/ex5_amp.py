# idiom: pytorch/examples — imagenet/main.py "main_worker" / "train": a DataLoader with worker processes and pin_memory=True, each batch moved with .to(device, non_blocking=True), torch.amp.GradScaler + torch.autocast around the forward
# source: https://github.com/pytorch/examples/blob/main/imagenet/main.py
# shows: batches produced by worker processes (handed over through shared memory) and pinned by the DataLoader's own thread, on the CPU, a CUDA device and an Apple GPU: full marks
"""Bài tập 5, kiểu pytorch/examples imagenet: DataLoader(num_workers, pin_memory=True)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

WORKERS = 2


def train(train_loader, model, criterion, optimizer, scaler, device, amp_dtype, steps, losses):
    model.train()
    for images, target in train_loader:
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
        if len(losses) == steps:
            return


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model = model.to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    train_loader = DataLoader(TensorDataset(inputs, targets), batch_size=len(inputs), shuffle=False,
                              num_workers=WORKERS, pin_memory=True, persistent_workers=True)
    losses = []
    while len(losses) < steps:  # one batch an epoch: the whole batch each step
        train(train_loader, model, criterion, optimizer, scaler, device, amp_dtype, steps, losses)
    return losses
