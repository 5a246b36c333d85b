# mistake: the device path returns CUDA events' elapsed_time as seconds, but it is in milliseconds (the CPU path, perf_counter, is right)
# fails: ex2.returns_mean_not_total
# message: ex2.elapsed_time_in_ms
# idiom: chainer's timer took the GPU events' elapsed time (milliseconds) for seconds; fixed in chainer PR #1779 ("Since the returned value is in millisecond scale, it must be divided by 1000")
# source: https://github.com/chainer/chainer/pull/1779
"""Bài tập 2 — CUDA events, quên đổi mili giây sang giây."""

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
    elapsed_time = start_event.elapsed_time(end_event)  # milliseconds, taken for seconds
    return elapsed_time / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
