# mistake: the back-off multiplies the micro-batch by 0.9 after each OOM (accelerate's find_executable_batch_size default since PR #3650) instead of halving it as the exercise asks
# fails: ex4.backoff_matches_full_batch
# message: ex4.micro_not_halved
# idiom: Hugging Face accelerate utils/memory.py find_executable_batch_size (`batch_size = int(batch_size * 0.9)`)
# source: https://github.com/huggingface/accelerate/pull/3650
"""Bài tập 4 — back-off ×0.9 kiểu accelerate."""

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
    batch_size = len(inputs)
    while True:
        if batch_size == 0:
            raise RuntimeError("No executable batch size found, reached zero.")
        optimizer.zero_grad(set_to_none=True)
        try:
            total = 0.0
            for xb, yb in zip(inputs.split(batch_size), targets.split(batch_size)):
                loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
                loss.backward()
                total += loss.item()
            break
        except torch.OutOfMemoryError:
            pass
        loss = None
        optimizer.zero_grad(set_to_none=True)
        _empty_cache(inputs.device)
        batch_size = int(batch_size * 0.9)
    optimizer.step()
    return total, batch_size
