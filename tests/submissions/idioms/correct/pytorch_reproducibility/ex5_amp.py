# idiom: PyTorch docs (Reproducibility) — PyTorch docs notes/randomness.rst "Reproducibility" (torch.manual_seed, cudnn.benchmark, use_deterministic_algorithms, seed_worker + generator)
# source: https://docs.pytorch.org/docs/stable/notes/randomness.html
# shows: process-wide determinism settings made at import time and the full batch served by a seeded DataLoader: full marks
"""Bài tập 5, kiểu ghi chú Reproducibility: seed, deterministic, DataLoader có generator."""

import contextlib
import os
import random

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
torch.manual_seed(0)
random.seed(0)
np.random.seed(0)
torch.backends.cudnn.benchmark = False
torch.use_deterministic_algorithms(True, warn_only=True)


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    g = torch.Generator()
    g.manual_seed(0)
    model.to(device)
    dataset = TensorDataset(inputs.to(device), targets.to(device))
    loader = DataLoader(dataset, batch_size=len(dataset), shuffle=False, num_workers=0,
                        worker_init_fn=seed_worker, generator=g)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if amp_dtype == torch.float16 else None
    losses = []
    for _ in range(steps):
        for xb, yb in loader:  # one batch: the whole data set
            optimizer.zero_grad(set_to_none=True)
            ctx = (torch.autocast(device_type=device.type, dtype=amp_dtype) if amp_dtype is not None
                   else contextlib.nullcontext())
            with ctx:
                loss = loss_fn(model(xb), yb)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            losses.append(loss.item())
    return losses
