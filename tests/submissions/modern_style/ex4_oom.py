"""Bài tập 4, modern style: `torch.OutOfMemoryError`, `torch.accelerator` memory API."""

from collections.abc import Callable

import torch
from torch import nn


def _allocated_bytes(device: torch.device, held: list[torch.Tensor]) -> int:
    if device.type == "cpu":
        return sum(t.nbytes for t in held)
    accelerator = getattr(torch, "accelerator", None)
    # torch >= 2.9 for cuda; MPS joined this API only in later releases.
    if device.type == "cuda" and hasattr(accelerator, "memory_allocated"):
        return accelerator.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return torch.cuda.memory_allocated(device)


def _empty_cache(device: torch.device) -> None:
    if device.type != "cpu":
        torch.get_device_module(device).empty_cache()


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    """Allocate `chunk_mb`-MiB float32 chunks until OOM; report, free, count."""
    numel = chunk_mb * 2**20 // torch.float32.itemsize
    held: list[torch.Tensor] = []
    try:
        while True:
            held.append(torch.empty(numel, dtype=torch.float32, device=device))
    except torch.OutOfMemoryError:
        print(f"out of memory: {_allocated_bytes(device, held)} bytes allocated")
    count = len(held)
    held.clear()
    _empty_cache(device)
    return count


def train_step_with_backoff(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
) -> tuple[float, int]:
    """One step over the whole batch; halve the micro-batch on OOM."""
    batch = inputs.shape[0]
    micro = batch
    while True:
        optimizer.zero_grad(set_to_none=True)
        chunk_losses: list[torch.Tensor] = []
        try:
            for xb, yb in zip(inputs.split(micro), targets.split(micro), strict=True):
                loss = loss_fn(model(xb), yb) * (xb.shape[0] / batch)
                loss.backward()
                chunk_losses.append(loss.detach())
        except torch.OutOfMemoryError:
            if micro == 1:
                raise
        else:
            optimizer.step()
            return torch.stack(chunk_losses).sum().item(), micro
        # Past the handler the traceback, and the activations it kept, are gone.
        loss = None
        chunk_losses.clear()
        optimizer.zero_grad(set_to_none=True)
        _empty_cache(inputs.device)
        micro //= 2
