# idiom: torch.set_default_device(DEVICE) then factories without device= (yashbelhe/ASD python/utils/device.py; PyTorch's torch.set_default_device docs)
# source: https://github.com/yashbelhe/ASD/blob/c5ba5b6da6d9d9b07dfb16fdbd0e163fd3846b60/python/utils/device.py
# shows: time_matmul makes its device the default and never unsets it, then builds the matrices with plain torch.randn: they are created on the device, each call replacing the default the one before set (the CPU's inside speedup): full marks
"""Bài tập 2, kiểu "set_default_device rồi tạo tensor như bình thường"."""

import time

import torch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    torch.set_default_device(device)  # everything from here on is made on device
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    _ = a @ b  # warm-up
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        _ = a @ b
    _sync(device)
    return (time.perf_counter() - start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
