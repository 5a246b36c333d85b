# mistake: times the repeats with CUDA events, converts to seconds, but returns the total instead of dividing by repeats
# fails: ex2.returns_mean_not_total
# message: ex2.total_not_mean
"""Bài tập 2 — CUDA events, trả về tổng thời gian."""

import time

import torch


def _backend(device):
    return torch.cuda if device.type == "cuda" else torch.mps


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    torch.mm(a, b)  # warm-up
    if device.type == "cpu":
        start = time.perf_counter()
        for _ in range(repeats):
            torch.mm(a, b)
        return (time.perf_counter() - start) / repeats

    backend = _backend(device)
    backend.synchronize()
    start_event = backend.Event(enable_timing=True)
    end_event = backend.Event(enable_timing=True)
    start_event.record()
    for _ in range(repeats):
        torch.mm(a, b)
    end_event.record()
    end_event.synchronize()  # wait for the events to be recorded!
    elapsed_time_ms = start_event.elapsed_time(end_event)
    return elapsed_time_ms / 1000  # all the repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
