# idiom: torch.accelerator — the device-generic event and synchronize (torch 2.6+): torch.accelerator.synchronize(), then torch.Event(enable_timing=True) around the timed loop, as PyTorch's and vLLM's benchmarks now time kernels on any accelerator
# source: https://docs.pytorch.org/docs/stable/generated/torch.Event.html
# shows: device-generic events, created with no device (the current accelerator) and read in ms, converted to s: full marks
"""Bài tập 2, kiểu torch.accelerator: torch.Event(enable_timing=True) cho mọi accelerator."""

import time

import torch


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b  # warm-up
    if device.type == "cpu":  # the CPU has no events: the host clock
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        return (time.perf_counter() - start) / repeats

    torch.accelerator.synchronize()
    start_event = torch.Event(enable_timing=True)
    end_event = torch.Event(enable_timing=True)
    start_event.record()
    for _ in range(repeats):
        a @ b
    end_event.record()
    torch.accelerator.synchronize()
    return start_event.elapsed_time(end_event) / 1000 / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
