# mistake: no synchronize, with the clock imported by name (from time import perf_counter): still only kernel launches
# fails: ex2.synchronizes_before_reading_clock, ex2.returns_mean_not_total
# message: ex2.no_sync_before_stop
"""Bài tập 2: `from time import perf_counter`, warm-up, but no synchronize."""

from time import perf_counter

from torch import device as Device
from torch import randn


def time_matmul(n: int, device: Device, repeats: int = 5) -> float:
    a = randn(n, n, device=device)
    b = randn(n, n, device=device)
    a @ b  # warm-up
    start = perf_counter()
    for _ in range(repeats):
        a @ b
    return (perf_counter() - start) / repeats


def speedup(n: int, device: Device, repeats: int = 5) -> float:
    return time_matmul(n, Device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
