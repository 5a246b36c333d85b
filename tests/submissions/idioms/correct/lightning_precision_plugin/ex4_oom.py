# idiom: PyTorch Lightning — lightning/pytorch/utilities/memory.py "is_oom_error", "garbage_collection_cuda" + tuner/batch_size_scaling.py "_adjust_batch_size(factor=0.5)"
# source: https://github.com/Lightning-AI/pytorch-lightning/blob/master/src/lightning/pytorch/utilities/memory.py
# shows: OOM recognised by is_oom_error() (message checks plus the typed class), cache emptied by a garbage_collection helper that itself tolerates an OOM, batch halved by factor 0.5: full marks
"""Bài tập 4, kiểu Lightning: is_oom_error, garbage_collection_cuda, _adjust_batch_size."""

import gc

import torch


def is_oom_error(exception: BaseException) -> bool:
    return (isinstance(exception, torch.OutOfMemoryError) or is_cuda_out_of_memory(exception)
            or is_cudnn_snafu(exception) or is_out_of_cpu_memory(exception))


def is_cuda_out_of_memory(exception: BaseException) -> bool:
    return (isinstance(exception, RuntimeError) and len(exception.args) == 1
            and "CUDA" in exception.args[0] and "out of memory" in exception.args[0])


def is_cudnn_snafu(exception: BaseException) -> bool:
    return (isinstance(exception, RuntimeError) and len(exception.args) == 1
            and "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." in exception.args[0])


def is_out_of_cpu_memory(exception: BaseException) -> bool:
    return (isinstance(exception, RuntimeError) and len(exception.args) == 1
            and "DefaultCPUAllocator: can't allocate memory" in exception.args[0])


def garbage_collection_cuda(device: torch.device) -> None:
    """Garbage collection Torch (CUDA) memory -- and MPS memory."""
    gc.collect()
    try:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        elif device.type == "mps":
            torch.mps.empty_cache()
    except RuntimeError as exception:
        if not is_oom_error(exception):
            raise


def _adjust_batch_size(batch_size: int, factor: float = 1.0) -> int:
    return max(int(batch_size * factor), 1)


def _allocated(device, held):
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    return sum(t.nbytes for t in held)


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    numel = chunk_mb * 1024 * 1024 // 4
    chunks = []
    while True:
        try:
            chunks.append(torch.empty(numel, dtype=torch.float32, device=device))
        except RuntimeError as exception:
            if not is_oom_error(exception):
                raise
            break
    count = len(chunks)
    print(f"OOM: {count} chunks, {_allocated(device, chunks)} bytes allocated")
    chunks.clear()
    garbage_collection_cuda(device)
    return count


def _run_step(model, inputs, targets, loss_fn, optimizer, batch_size):
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for xb, yb in zip(inputs.split(batch_size), targets.split(batch_size)):
        loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total += loss.item()
    return total


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    batch_size = len(inputs)
    while True:
        try:
            total = _run_step(model, inputs, targets, loss_fn, optimizer, batch_size)
            break
        except RuntimeError as exception:
            if not is_oom_error(exception) or batch_size == 1:
                raise
            optimizer.zero_grad(set_to_none=True)
            garbage_collection_cuda(inputs.device)
            batch_size = _adjust_batch_size(batch_size, factor=0.5)
    optimizer.step()
    return total, batch_size
