# mistake: the back-off catches every RuntimeError (the PyTorch FAQ's `except RuntimeError:  # Out of memory`, timm's _try_run) and halves on a shape or device error too: a real bug is retried with smaller micro-batches and, if one of them runs, silently hidden
# fails: ex4.backoff_reraises_other_errors
# message: ex4.swallows_other_errors
# idiom: PyTorch docs FAQ "My out of memory exception handler can't allocate memory" (`except RuntimeError: # Out of memory`); timm benchmark.py _try_run (`except RuntimeError as e` + decay_batch_step)
# source: https://docs.pytorch.org/docs/stable/notes/faq.html
"""Bài tập 4 — except RuntimeError (mọi lỗi đều là OOM)."""

import torch


def _allocated(device, held):
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return sum(t.nbytes for t in held)


def _empty_cache(device):
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    try:
        while True:
            chunks.append(torch.empty(numel, dtype=torch.float32, device=device))
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
        oom = False
        try:
            total = 0.0
            for xb, yb in zip(inputs.split(micro), targets.split(micro)):
                loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
                loss.backward()
                total += loss.item()
        except RuntimeError:  # Out of memory
            if micro == 1:
                raise
            oom = True
        if not oom:
            break
        loss = None
        optimizer.zero_grad(set_to_none=True)
        _empty_cache(inputs.device)
        micro //= 2
    optimizer.step()
    return total, micro
