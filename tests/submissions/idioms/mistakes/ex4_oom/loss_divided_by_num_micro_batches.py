# mistake: gradient accumulation divides each micro-batch loss by the number of micro-batches (loss / accum_steps) instead of weighting it by len(micro_batch) / len(batch): wrong as soon as the last micro-batch is smaller
# fails: ex4.backoff_matches_full_batch
# message: ex4.grads_not_full_batch
# idiom: Hugging Face transformers Trainer (issue #38837, PR #38872: loss always divided by gradient_accumulation_steps); keras-team/keras issue #20241
# source: https://github.com/huggingface/transformers/pull/38872
"""Bài tập 4 — loss / accum_steps."""

import math

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
        accum_steps = math.ceil(len(inputs) / micro)
        optimizer.zero_grad(set_to_none=True)
        try:
            total = 0.0
            for xb, yb in zip(inputs.split(micro), targets.split(micro)):
                loss = loss_fn(model(xb), yb) / accum_steps
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
