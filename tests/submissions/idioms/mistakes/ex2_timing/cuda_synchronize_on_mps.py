# mistake: time_matmul() calls torch.cuda.synchronize() (the lesson's line) for every device that is not the CPU: on an Apple GPU it raises AssertionError "Torch not compiled with CUDA enabled"
# fails: ex2.synchronizes_before_reading_clock, ex2.warms_up, ex2.returns_mean_not_total, ex2.tensors_created_on_device, ex2.speedup_consistent
# message: cuda_api_off_cuda
# idiom: karpathy/llm.c issue #73 and karpathy/nanochat PR #792 (torch.cuda.synchronize() on Apple Silicon)
# source: https://github.com/karpathy/llm.c/issues/73
"""Bài tập 2 — torch.cuda.synchronize() cho mọi GPU."""

import time

import torch


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    _ = a @ b  # warm-up
    if device.type != "cpu":
        torch.cuda.synchronize()
    start = time.time()
    for _ in range(repeats):
        _ = a @ b
    if device.type != "cpu":
        torch.cuda.synchronize()
    return (time.time() - start) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
