"""Bài tập 5, bound-names style: `from torch.amp import GradScaler, autocast`."""

from torch import float16
from torch.amp import GradScaler, autocast
from torch.nn import CrossEntropyLoss
from torch.optim import Adam


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):  # type: ignore[no-untyped-def]
    model = model.to(device)
    inputs = inputs.to(device)
    targets = targets.to(device)
    optimizer = Adam(model.parameters(), lr=lr)
    loss_fn = CrossEntropyLoss()
    scaler = GradScaler(device.type, enabled=amp_dtype == float16)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with autocast(device.type, dtype=amp_dtype or float16, enabled=amp_dtype is not None):
            loss = loss_fn(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    return losses
