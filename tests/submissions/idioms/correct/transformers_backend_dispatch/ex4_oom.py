# idiom: Hugging Face transformers — transformers/testing_utils.py "BACKEND_EMPTY_CACHE", "BACKEND_MEMORY_ALLOCATED", "backend_empty_cache", "backend_memory_allocated"
# source: https://github.com/huggingface/transformers/blob/main/src/transformers/testing_utils.py
# shows: empty_cache and memory_allocated reached through dispatch tables built at import time: full marks
"""Bài tập 4, kiểu transformers testing_utils: backend_empty_cache, backend_memory_allocated."""

import torch


def _device_agnostic_dispatch(device, dispatch_table, *args, **kwargs):
    if device not in dispatch_table:
        fn = dispatch_table["default"]
        return fn(*args, **kwargs) if callable(fn) else fn
    fn = dispatch_table[device]
    if not callable(fn):
        return fn
    return fn(*args, **kwargs)


BACKEND_EMPTY_CACHE = {
    "cuda": torch.cuda.empty_cache,
    "mps": torch.mps.empty_cache,
    "cpu": None,
    "default": None,
}
BACKEND_MEMORY_ALLOCATED = {
    "cuda": torch.cuda.memory_allocated,
    "mps": torch.mps.current_allocated_memory,
    "cpu": 0,
    "default": 0,
}


def backend_empty_cache(device: str):
    _device_agnostic_dispatch(device, BACKEND_EMPTY_CACHE)


def backend_memory_allocated(device: str):
    return _device_agnostic_dispatch(device, BACKEND_MEMORY_ALLOCATED)


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    try:
        while True:
            chunks.append(torch.empty(numel, dtype=torch.float32, device=device))
    except torch.OutOfMemoryError:
        allocated = backend_memory_allocated(device.type) or sum(c.nbytes for c in chunks)
        print(f"OOM after {len(chunks)} chunks: {allocated} bytes allocated")
    count = len(chunks)
    chunks.clear()
    backend_empty_cache(device.type)
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
        backend_empty_cache(inputs.device.type)
        micro //= 2
    optimizer.step()
    return total, micro
