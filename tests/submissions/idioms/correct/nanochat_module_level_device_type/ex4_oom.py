# idiom: karpathy/nanochat — scripts/base_train.py: `get_max_memory = torch.cuda.max_memory_allocated if device_type == "cuda" else lambda: 0` at the top of the script: the device's memory functions chosen once from the detected device type
# source: https://github.com/karpathy/nanochat/blob/master/scripts/base_train.py
# shows: fill_until_oom() and the back-off call the module-level `empty_cache` and `memory_allocated` chosen at import for the machine's accelerator: full marks on a GPU and a Mac, where the module is imported
"""Bài tập 4, kiểu nanochat: empty_cache chọn một lần khi import."""

import torch

device_type = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
empty_cache = torch.cuda.empty_cache if device_type == "cuda" else torch.mps.empty_cache if device_type == "mps" else lambda: None
memory_allocated = (torch.cuda.memory_allocated if device_type == "cuda"
                    else torch.mps.current_allocated_memory if device_type == "mps" else lambda: 0)


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    try:
        while True:
            chunks.append(torch.empty(numel, dtype=torch.float32, device=device))
    except torch.OutOfMemoryError:
        held = memory_allocated() if device.type != "cpu" else sum(t.nbytes for t in chunks)
        print(f"OOM after {len(chunks)} chunks: {held} bytes allocated")
    count = len(chunks)
    chunks.clear()
    if device.type != "cpu":
        empty_cache()
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
        if inputs.device.type != "cpu":
            empty_cache()
        micro //= 2
    optimizer.step()
    return total, micro
