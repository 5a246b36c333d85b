# idiom: PyTorch docs (FAQ) — PyTorch docs notes/faq.rst "My out of memory exception handler can't allocate memory" + "Don't accumulate history across your training loop"
# source: https://docs.pytorch.org/docs/stable/notes/faq.html
# shows: an `oom` flag set in the handler and the recovery done after it (the exception and its frames already gone), float(loss) accumulation, del of the chunk list: full marks
"""Bài tập 4, kiểu PyTorch FAQ: xử lý OOM bên ngoài except."""

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
    oom = False
    while not oom:
        try:
            chunks.append(torch.empty(numel, dtype=torch.float32, device=device))
        except torch.OutOfMemoryError:  # the FAQ writes `except RuntimeError`: catch only the OOM
            oom = True
    # outside the except clause: the exception and the frame it holds are gone
    print(f"out of memory: {_allocated(device, chunks)} bytes allocated")
    count = len(chunks)
    del chunks  # don't hold onto tensors you don't need
    _empty_cache(device)
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    def run_model(batch_size):
        optimizer.zero_grad(set_to_none=True)
        total_loss = 0.0
        for xb, yb in zip(inputs.split(batch_size), targets.split(batch_size)):
            loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
            loss.backward()
            total_loss += float(loss)  # not `total_loss += loss`: that keeps the graph alive
            del loss
        return total_loss

    batch_size = len(inputs)
    while True:
        oom = False
        try:
            total_loss = run_model(batch_size)
        except torch.OutOfMemoryError:
            if batch_size == 1:
                raise
            oom = True
        if not oom:
            break
        optimizer.zero_grad(set_to_none=True)
        _empty_cache(inputs.device)
        batch_size //= 2
    optimizer.step()
    return total_loss, batch_size
