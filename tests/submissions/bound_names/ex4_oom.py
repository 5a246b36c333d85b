"""Bài tập 4, bound-names style: `from torch.cuda import OutOfMemoryError, empty_cache, memory_allocated`."""

from torch import device as Device
from torch import empty, float32
from torch.cuda import OutOfMemoryError, empty_cache, memory_allocated
from torch.mps import empty_cache as mps_empty_cache


def _free(device: Device) -> None:
    if device.type == "cuda":
        empty_cache()
    elif device.type == "mps":
        mps_empty_cache()


def fill_until_oom(device: Device, chunk_mb: int = 64) -> int:
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    try:
        while True:
            chunks.append(empty(numel, dtype=float32, device=device))
    except OutOfMemoryError:
        held = memory_allocated() if device.type == "cuda" else sum(c.nbytes for c in chunks)
        print(f"OOM after {len(chunks)} chunks, {held / 2**20:.0f} MiB allocated")
    count = len(chunks)
    chunks.clear()
    _free(device)
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):  # type: ignore[no-untyped-def]
    batch = len(inputs)
    micro = batch
    while micro >= 1:
        optimizer.zero_grad()
        total = 0.0
        try:
            for start in range(0, batch, micro):
                x, y = inputs[start:start + micro], targets[start:start + micro]
                loss = loss_fn(model(x), y) * len(x) / batch
                loss.backward()
                total += loss.item()
        except OutOfMemoryError:
            loss = None
            optimizer.zero_grad()
            _free(inputs.device)
            micro //= 2
            continue
        optimizer.step()
        return total, micro
    raise OutOfMemoryError("even a micro-batch of 1 does not fit")
