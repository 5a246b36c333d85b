# mistake: no warm-up matmul before the clock starts, so the first (slow) matmul is timed
# fails: ex2.warms_up, ex2.returns_mean_not_total
# message: ex2.no_warmup
"""Bài tập 2 — đo thời gian matmul CPU vs GPU."""

import time

import torch


def _synchronize(device: torch.device) -> None:
    """Wait until every kernel queued on `device` has finished (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    """Thời gian trung bình (giây) của MỘT phép nhân n×n @ n×n."""
    a = torch.randn(n, n, device=device, dtype=torch.float32)
    b = torch.randn(n, n, device=device, dtype=torch.float32)
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        _ = a @ b
    _synchronize(device)
    return (time.perf_counter() - start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    """Device nhanh hơn CPU bao nhiêu lần."""
    cpu_seconds = time_matmul(n, torch.device("cpu"), repeats)
    return cpu_seconds / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
