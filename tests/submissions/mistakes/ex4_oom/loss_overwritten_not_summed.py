# mistake: the loss of each micro-batch overwrites the running total (`total_loss = loss.item()`, not `+=`): the gradients are the full batch's, the returned loss only the last micro-batch's share
# fails: ex4.backoff_matches_full_batch
# message: ex4.wrong_loss
"""Bài tập 4, kiểu code trong bài học."""

import torch


def fill_until_oom(device, chunk_mb=64):
    """Cấp phát đến khi OOM rồi dọn. / Allocate until OOM, then clean up."""
    numel = chunk_mb * 1024 * 1024 // 4
    tensors = []
    try:
        while True:
            tensors.append(torch.zeros(numel, device=device))
    except torch.cuda.OutOfMemoryError:
        if device.type == "cuda":
            allocated = torch.cuda.memory_allocated()
        else:
            allocated = sum(t.numel() * t.element_size() for t in tensors)
        print(f"Allocated: {allocated / 1e9:.2f} GB")
    count = len(tensors)
    del tensors
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()
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
                total_loss = loss.item()  # overwritten: only the last micro-batch's share survives
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
