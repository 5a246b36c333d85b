# idiom: karpathy/nanochat — karpathy/nanochat PR #792 "get_sync_fn(device_type)" (common.py), used as `synchronize = get_sync_fn(device_type)` in base_train.py
# source: https://github.com/karpathy/nanochat/pull/792
# shows: synchronize held in a local variable (a function object fetched from torch.cuda / torch.mps when time_matmul starts) and a no-op lambda for the CPU: full marks
"""Bài tập 2, kiểu nanochat: synchronize = get_sync_fn(device_type)."""

import time

import torch


def get_sync_fn(device_type: str):
    if device_type == "cuda":
        return torch.cuda.synchronize
    if device_type == "mps":
        return torch.mps.synchronize
    return lambda: None


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    synchronize = get_sync_fn(device.type)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b  # warm-up
    synchronize()
    t0 = time.time()
    for _ in range(repeats):
        a @ b
    synchronize()
    t1 = time.time()
    return (t1 - t0) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
