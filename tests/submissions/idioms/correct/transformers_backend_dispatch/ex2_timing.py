# idiom: Hugging Face transformers — transformers/testing_utils.py "_device_agnostic_dispatch", "BACKEND_SYNCHRONIZE", "backend_synchronize"
# source: https://github.com/huggingface/transformers/blob/main/src/transformers/testing_utils.py
# shows: synchronize reached through a dict built at import time that holds torch.cuda.synchronize / torch.mps.synchronize themselves: full marks
"""Bài tập 2, kiểu transformers testing_utils: bảng dispatch theo device."""

import time

import torch


def _device_agnostic_dispatch(device, dispatch_table, *args, **kwargs):
    if device not in dispatch_table:
        fn = dispatch_table["default"]
        return fn(*args, **kwargs) if callable(fn) else fn
    fn = dispatch_table[device]
    # Some device agnostic functions return values or None, will return then directly.
    if not callable(fn):
        return fn
    return fn(*args, **kwargs)


BACKEND_SYNCHRONIZE = {
    "cuda": torch.cuda.synchronize,
    "mps": torch.mps.synchronize,
    "cpu": None,
    "default": None,
}


def backend_synchronize(device: str):
    return _device_agnostic_dispatch(device, BACKEND_SYNCHRONIZE)


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    torch.matmul(a, b)  # warm-up
    backend_synchronize(device.type)
    start = time.perf_counter()
    for _ in range(repeats):
        torch.matmul(a, b)
    backend_synchronize(device.type)
    return (time.perf_counter() - start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
