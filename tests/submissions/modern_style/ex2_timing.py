"""Bài tập 2, modern style: `torch.utils.benchmark.Timer`."""

import torch
from torch.utils import benchmark


def _synchronize(device: torch.device) -> None:
    if device.type == "cpu":
        return
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is not None:
        accelerator.synchronize(device)
    else:
        torch.get_device_module(device).synchronize()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    """Mean seconds of one n×n @ n×n float32 matmul on `device`."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    torch.mm(a, b)  # warm-up
    _synchronize(device)
    # Timer synchronizes the accelerator when it reads the clock, and by default
    # it would pin one thread: give it the threads the CPU really uses.
    timer = benchmark.Timer(
        stmt="a @ b",
        globals={"a": a, "b": b},
        num_threads=torch.get_num_threads(),
    )
    return float(timer.timeit(repeats).mean)


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    """time on the CPU / time on `device`."""
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(
        n, device, repeats
    )


SMALL_N_ANSWER = "B"
