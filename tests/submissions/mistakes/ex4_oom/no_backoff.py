# mistake: train_step_with_backoff just trains on the full batch: no try/except, no halving, no gradient accumulation
# fails: ex4.backoff_matches_full_batch
# message: ex4.no_backoff
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


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    """Cấp phát các khối chunk_mb MiB cho tới khi OOM, in bộ nhớ, dọn dẹp."""
    n_elems = chunk_mb * 1024 * 1024 // 4
    chunks: list[torch.Tensor] = []
    while True:
        try:
            chunks.append(torch.empty(n_elems, dtype=torch.float32, device=device))
        except _OutOfMemoryError:
            break
    count = len(chunks)
    allocated = _allocated_bytes(device, chunks)
    print(f"OOM after {count} chunks: {allocated / 2**20:.1f} MiB allocated")
    chunks.clear()
    del chunks
    _empty_cache(device)
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer) -> tuple[float, int]:
    """Một bước optimizer trên cả batch."""
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item(), len(inputs)
