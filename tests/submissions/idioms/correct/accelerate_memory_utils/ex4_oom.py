# idiom: Hugging Face accelerate — accelerate/utils/memory.py "should_reduce_batch_size", "clear_device_cache", "find_executable_batch_size"
# source: https://github.com/huggingface/accelerate/blob/main/src/accelerate/utils/memory.py
# shows: retrying inside a find_executable_batch_size decorator (halving reduce_batch_size_fn, cache cleared with gc.collect()) and an OOM recognised by its message: full marks
"""Bài tập 4, kiểu accelerate: find_executable_batch_size, clear_device_cache."""

import functools
import gc

import torch


def is_mps_available():
    return torch.backends.mps.is_available() and torch.backends.mps.is_built()


def clear_device_cache(garbage_collection=False):
    if garbage_collection:
        gc.collect()
    if is_mps_available():
        torch.mps.empty_cache()
    elif torch.cuda.is_available():
        torch.cuda.empty_cache()


def should_reduce_batch_size(exception: Exception) -> bool:
    _statements = [
        " out of memory.",  # OOM for CUDA, HIP, XPU
        "MPS backend out of memory",  # not in accelerate's list: a Mac's OOM is a plain RuntimeError
        "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.",
        "DefaultCPUAllocator: can't allocate memory",
    ]
    if isinstance(exception, RuntimeError) and len(exception.args) == 1:
        return any(err in exception.args[0] for err in _statements)
    return False


def find_executable_batch_size(function=None, starting_batch_size=128, reduce_batch_size_fn=None):
    if function is None:
        return functools.partial(find_executable_batch_size, starting_batch_size=starting_batch_size,
                                 reduce_batch_size_fn=reduce_batch_size_fn)

    batch_size = starting_batch_size
    if reduce_batch_size_fn is None:

        def reduce_batch_size_fn():
            nonlocal batch_size
            batch_size = batch_size // 2  # accelerate now multiplies by 0.9; the lesson halves
            return batch_size

    def decorator(*args, **kwargs):
        nonlocal batch_size
        clear_device_cache(garbage_collection=True)
        while True:
            if batch_size == 0:
                raise RuntimeError("No executable batch size found, reached zero.")
            try:
                return function(batch_size, *args, **kwargs)
            except Exception as e:
                if should_reduce_batch_size(e):
                    clear_device_cache(garbage_collection=True)
                    batch_size = reduce_batch_size_fn()
                else:
                    raise

    return decorator


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
        except Exception as e:
            if not should_reduce_batch_size(e):
                raise
            break
    count = len(chunks)
    print(f"out of memory after {count} chunks, {_allocated(device, chunks)} bytes allocated")
    chunks.clear()  # drop the references, then hand the cache back
    clear_device_cache(garbage_collection=True)
    return count


def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    num_items_in_batch = len(inputs)

    @find_executable_batch_size(starting_batch_size=len(inputs))
    def inner_training_loop(batch_size):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for xb, yb in zip(inputs.split(batch_size), targets.split(batch_size)):
            loss = loss_fn(model(xb), yb) * (len(xb) / num_items_in_batch)
            loss.backward()
            total += loss.item()
        optimizer.step()
        return total, batch_size

    return inner_training_loop()
