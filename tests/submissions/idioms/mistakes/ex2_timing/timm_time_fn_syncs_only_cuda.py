# mistake: timm benchmark.py picks its clock with `if 'cuda' in device: cuda_timestamp (synchronizes) else: timestamp (does not)`, so on mps the clock stops before the matmuls finish
# fails: ex2.synchronizes_before_reading_clock, ex2.returns_mean_not_total
# message: ex2.no_sync_before_stop
# idiom: timm benchmark.py BenchmarkRunner.__init__ (`if 'cuda' in self.device: self.time_fn = partial(cuda_timestamp, ...)`); same bug fixed in karpathy/nanochat PR #792
# source: https://github.com/karpathy/nanochat/pull/792
"""Bài tập 2 — kiểu timm: time_fn chỉ synchronize cho cuda."""

import time
from functools import partial

import torch


def timestamp(sync=False):
    return time.perf_counter()


def cuda_timestamp(sync=False, device=None):
    if sync:
        torch.cuda.synchronize(device=device)
    return time.perf_counter()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    if "cuda" in device.type:
        time_fn = partial(cuda_timestamp, device=device)
    else:
        time_fn = timestamp
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    _ = a @ b  # warm-up
    t_start = time_fn(True)
    for _ in range(repeats):
        _ = a @ b
    t_end = time_fn(True)
    return (t_end - t_start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
