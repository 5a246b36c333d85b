# mistake: fill_until_oom never prints the allocated memory when the OOM happens
# fails: ex4.fill_until_oom_prints_allocated
# message: ex4.no_print
"""Bài tập 4 — OOM: bắt lỗi và dọn dẹp."""

from collections.abc import Callable

import torch
from torch import nn

_OutOfMemoryError = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def _allocated_bytes(device: torch.device, chunks: list[torch.Tensor]) -> int:
    """Bytes held by live tensors on `device` right now."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return sum(chunk.nbytes for chunk in chunks)


def _empty_cache(device: torch.device) -> None:
    """Hand the caching allocator's unused blocks back to the driver."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def _accumulate_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    micro: int,
) -> float:
    """Forward + backward in chunks of `micro` samples; return the batch's mean loss."""
    total_loss = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro), strict=True):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total_loss += loss.item()
    return total_loss


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    """Cấp phát các khối chunk_mb MiB cho tới khi OOM, dọn dẹp."""
    n_elems = chunk_mb * 1024 * 1024 // 4
    chunks: list[torch.Tensor] = []
    while True:
        try:
            chunks.append(torch.empty(n_elems, dtype=torch.float32, device=device))
        except _OutOfMemoryError:
            break
    count = len(chunks)
    chunks.clear()
    del chunks
    _empty_cache(device)
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer) -> tuple[float, int]:
    """Một bước optimizer trên cả batch, chia đôi micro-batch khi OOM."""
    micro = len(inputs)
    while True:
        optimizer.zero_grad(set_to_none=True)
        try:
            total_loss = _accumulate_gradients(model, inputs, targets, loss_fn, micro)
            break
        except _OutOfMemoryError:
            if micro == 1:
                raise
        optimizer.zero_grad(set_to_none=True)
        _empty_cache(inputs.device)
        micro //= 2
    optimizer.step()
    return total_loss, micro
