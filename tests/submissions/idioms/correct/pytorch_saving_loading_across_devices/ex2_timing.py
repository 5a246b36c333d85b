# idiom: PyTorch tutorial (Saving and loading models) — reference logic of the lesson (this style's point is in ex4_oom)
# source: https://docs.pytorch.org/tutorials/beginner/saving_loading_models.html
# shows: the plain device-agnostic lesson code beside the idiom files still gets full marks
"""Bài tập 2 — đo thời gian matmul CPU vs GPU."""

import time

import torch


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    _ = a @ b  # warm-up
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        _ = a @ b
    _synchronize(device)
    return (time.perf_counter() - start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
