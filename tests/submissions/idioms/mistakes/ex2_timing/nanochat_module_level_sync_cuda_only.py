# mistake: the script chooses its synchronize once, at the top, as nanochat's base_train.py does: `torch.cuda.synchronize if device_type == "cuda" else lambda: None`, so on a Mac (device_type "mps") the clock stops before the matmuls finish
# fails: ex2.synchronizes_before_reading_clock, ex2.returns_mean_not_total
# message: ex2.no_sync_before_stop
# idiom: karpathy/nanochat scripts/base_train.py (module-level `synchronize`, before PR #792's get_sync_fn added MPS)
# source: https://github.com/karpathy/nanochat/pull/792
"""Bài tập 2 — kiểu nanochat: synchronize chọn khi import, chỉ cho cuda."""

import time

import torch

if torch.cuda.is_available():
    device_type = "cuda"
elif torch.backends.mps.is_available():
    device_type = "mps"
else:
    device_type = "cpu"
synchronize = torch.cuda.synchronize if device_type == "cuda" else lambda: None


def time_matmul(n, device, repeats=5):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    synchronize()
    t0 = time.time()
    for _ in range(repeats):
        a @ b
    synchronize()
    return (time.time() - t0) / repeats


def speedup(n, device, repeats=3):
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
