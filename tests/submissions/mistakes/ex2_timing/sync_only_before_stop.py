# mistake: synchronizes after the timed loop but not after the warm-up, so the clock starts while the warm-up still runs
# fails: ex2.synchronizes_before_reading_clock, ex2.returns_mean_not_total
# message: ex2.no_sync_before_start
"""Bài tập 2, kiểu code trong bài học."""

import time

import torch


def time_matmul(n, device, repeats=5):
    """Thời gian trung bình một phép a @ b. / Mean time of one a @ b."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)

    # Warm-up
    _ = a @ b

    start = time.time()
    for _ in range(repeats):
        _ = a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()
    return (time.time() - start) / repeats


def speedup(n, device, repeats=3):
    """CPU time / device time."""
    cpu_t = time_matmul(n, torch.device("cpu"), repeats)
    gpu_t = time_matmul(n, device, repeats)
    return cpu_t / gpu_t


# Vì sao với N = 100, GPU thường chậm hơn CPU? -> overhead kernel launch + copy memory
SMALL_N_ANSWER = "b"
