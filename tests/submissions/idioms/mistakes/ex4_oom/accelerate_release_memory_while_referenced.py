# mistake: fill_until_oom() frees the chunks accelerate-style, `chunks = release_memory(*chunks)`: release_memory() empties the cache while the caller's list still holds every chunk, so nothing goes back to the driver
# fails: ex4.fill_until_oom_empty_cache_after_release
# message: ex4.empty_cache_while_referenced
# idiom: Hugging Face accelerate utils/memory.py release_memory() (docstring: `a, b = release_memory(a, b)`; the objects are set to None only in its own list)
# source: https://github.com/huggingface/accelerate/blob/main/src/accelerate/utils/memory.py
"""Bài tập 4 — kiểu accelerate release_memory(*objects)."""

import gc

import torch


def _allocated(device, held):
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return sum(t.nbytes for t in held)


def clear_device_cache(garbage_collection=False):
    if garbage_collection:
        gc.collect()
    if torch.backends.mps.is_available():
        torch.mps.empty_cache()
    elif torch.cuda.is_available():
        torch.cuda.empty_cache()


def release_memory(*objects):
    if not isinstance(objects, list):
        objects = list(objects)
    for i in range(len(objects)):
        objects[i] = None
    clear_device_cache(garbage_collection=True)
    return objects


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    try:
        while True:
            chunks.append(torch.empty(numel, dtype=torch.float32, device=device))
    except torch.OutOfMemoryError:
        print(f"OOM after {len(chunks)} chunks: {_allocated(device, chunks)} bytes allocated")
    count = len(chunks)
    chunks = release_memory(*chunks)
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
        clear_device_cache()
        micro //= 2
    optimizer.step()
    return total, micro
