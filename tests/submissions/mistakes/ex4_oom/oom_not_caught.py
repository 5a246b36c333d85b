# mistake: fill_until_oom has no try/except, so the out-of-memory error escapes the allocation loop
# fails: ex4.fill_until_oom_returns_count, ex4.fill_until_oom_frees_memory, ex4.fill_until_oom_empty_cache_after_release, ex4.fill_until_oom_prints_allocated
# message: ex4.oom_not_caught
"""Bài tập 4, kiểu code trong bài học."""

import torch


def fill_until_oom(device, chunk_mb=64):
    """Cấp phát đến khi OOM rồi dọn. / Allocate until OOM, then clean up."""
    numel = chunk_mb * 1024 * 1024 // 4
    tensors = []
    while True:
        tensors.append(torch.zeros(numel, device=device))
        if device.type == "cuda":
            print(f"Allocated: {torch.cuda.memory_allocated() / 1e9:.2f} GB")
    count = len(tensors)
    del tensors
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    """Giảm batch + gradient accumulation khi OOM. / Halve the batch on OOM."""
    batch_size = inputs.size(0)
    micro = batch_size
    while True:
        try:
            optimizer.zero_grad()
            total_loss = 0.0
            for i in range(0, batch_size, micro):
                x = inputs[i : i + micro]
                y = targets[i : i + micro]
                loss = loss_fn(model(x), y) * x.size(0) / batch_size
                loss.backward()
                total_loss += loss.item()
            optimizer.step()
            return total_loss, micro
        except torch.cuda.OutOfMemoryError:
            loss = None
            optimizer.zero_grad()
            if inputs.device.type == "cuda":
                torch.cuda.empty_cache()
            micro = micro // 2
            if micro == 0:
                raise
