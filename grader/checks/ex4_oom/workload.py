"""The training step ex4's back-off checks use, and the grader's own reference for it."""

from __future__ import annotations

import copy

import torch
from torch import nn

from grader.checks.support.meter import MemoryMeter

BATCH = 512


def make_problem(device: torch.device) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(14)
    # Wide and shallow: activations (batch x 2048) dominate the weights, so the peak memory
    # of a step halves with the micro-batch and a budget can tell the sizes apart.
    model = nn.Sequential(nn.Linear(32, 2048), nn.ReLU(), nn.Linear(2048, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    inputs = torch.randn(BATCH, 32, generator=gen)
    targets = torch.randint(0, 4, (BATCH,), generator=gen)
    return model.to(device), inputs.to(device), targets.to(device)


def optimizer_for(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.5)


def reference_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, micro: int) -> tuple[float, int]:
    """Gradient accumulation as the lesson teaches it, each chunk's loss scaled by its share."""
    optimizer = optimizer_for(model)
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro), strict=True):
        loss = nn.functional.cross_entropy(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total, micro


def peak_bytes(micro: int, device: torch.device) -> int:
    model, inputs, targets = make_problem(device)
    meter = MemoryMeter()
    with meter:
        reference_step(model, inputs, targets, micro)
    return meter.peak


def budget_forcing_backoff(device: torch.device) -> int:
    """Between the reference's peaks at B/4 and B/2: the full batch cannot fit, a quarter can.

    Measured here (CPU, torch 2.13): peak(512) 12.4 MiB, peak(256) 6.6 MiB, peak(128) 3.6 MiB,
    peak(64) 2.1 MiB; the budget (5.1 MiB) sits mid-way between B/4 and B/2, so an honest
    back-off halves twice and the reference solution ends at micro-batch 128.
    """
    return (peak_bytes(BATCH // 2, device) + peak_bytes(BATCH // 4, device)) // 2


def trained_copy(device: torch.device) -> tuple[nn.Module, float]:
    model, inputs, targets = make_problem(device)
    reference = copy.deepcopy(model)
    loss, _ = reference_step(reference, inputs, targets, BATCH)
    return reference, loss
