# mistake: creates the matrices on the CPU and calls .to(device) on them inside the timed loop
# fails: ex2.tensors_created_on_device, ex2.returns_mean_not_total
# message: ex2.copies_in_loop
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
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    _ = a.to(device) @ b.to(device)  # warm-up
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        _ = a.to(device) @ b.to(device)
    _synchronize(device)
    return (time.perf_counter() - start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    """Device nhanh hơn CPU bao nhiêu lần."""
    cpu_seconds = time_matmul(n, torch.device("cpu"), repeats)
    return cpu_seconds / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
