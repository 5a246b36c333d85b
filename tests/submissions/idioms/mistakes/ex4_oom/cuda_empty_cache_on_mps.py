# mistake: fill_until_oom() always calls torch.cuda.empty_cache() (the lesson's line): on a Mac that is a silent no-op, so the MPS cache is never handed back
# fails: ex4.fill_until_oom_empty_cache_after_release
# message: ex4.no_empty_cache
# idiom: CUDA-only cache clearing in MPS ports (idiap/coqui-ai-Trainer PR #27 "Guard torch.cuda.empty_cache()", Stability-AI/stable-audio-3 PR #68 "cache clears cover mps"); accelerate's clear_device_cache exists for this
# source: https://github.com/idiap/coqui-ai-Trainer/pull/27
"""Bài tập 4 — torch.cuda.empty_cache() cho mọi device."""

import torch


def _allocated(device, held):
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return sum(t.nbytes for t in held)


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    try:
        while True:
            chunks.append(torch.empty(numel, dtype=torch.float32, device=device))
    except torch.OutOfMemoryError:
        print(f"OOM after {len(chunks)} chunks: {_allocated(device, chunks)} bytes allocated")
    count = len(chunks)
    del chunks
    torch.cuda.empty_cache()
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
        torch.cuda.empty_cache()
        micro //= 2
    optimizer.step()
    return total, micro
