# idiom: torch.set_default_device(DEVICE) then factories without device= (yashbelhe/ASD python/utils/device.py)
# source: https://github.com/yashbelhe/ASD/blob/c5ba5b6da6d9d9b07dfb16fdbd0e163fd3846b60/python/utils/device.py
# shows: fill_until_oom makes its device the default, never unsets it, and allocates with plain torch.empty: the chunks fill the device, whose out-of-memory error it catches: full marks
"""Bài tập 4 — OOM: bắt lỗi, dọn dẹp, gradient accumulation."""

import torch


def _allocated(device: torch.device, held: list) -> int:
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return sum(t.nbytes for t in held)


def _empty_cache(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    torch.set_default_device(device)
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    try:
        while True:
            chunks.append(torch.empty(numel))
    except torch.OutOfMemoryError:
        print(f"OOM after {len(chunks)} chunks: {_allocated(device, chunks)} bytes allocated")
    count = len(chunks)
    chunks.clear()
    _empty_cache(device)
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    micro = len(inputs)
    while True:
        optimizer.zero_grad(set_to_none=True)
        try:
            total = 0.0
            for xb, yb in zip(inputs.split(micro), targets.split(micro)):
                loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
                loss.backward()
                total += loss.item()
            break
        except torch.OutOfMemoryError:
            if micro == 1:
                raise
        loss = None
        optimizer.zero_grad(set_to_none=True)
        _empty_cache(inputs.device)
        micro //= 2
    optimizer.step()
    return total, micro
