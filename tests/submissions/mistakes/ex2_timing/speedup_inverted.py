# mistake: speedup divides the device time by the CPU time (inverted ratio)
# fails: ex2.speedup_consistent
# message: ex2.speedup_inconsistent
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
    _ = a @ b  # warm-up
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        _ = a @ b
    _synchronize(device)
    return (time.perf_counter() - start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    """Device nhanh hơn CPU bao nhiêu lần."""
    device_seconds = time_matmul(n, device, repeats)
    return device_seconds / time_matmul(n, torch.device("cpu"), repeats)


SMALL_N_ANSWER = "B"
