# idiom: PyTorch tutorials — pytorch/tutorials recipes/recipes/amp_recipe.py "start_timer" / "end_timer_and_print"
# source: https://github.com/pytorch/tutorials/blob/main/recipes_source/recipes/amp_recipe.py
# shows: a global start_time set by start_timer() after gc.collect()/empty_cache()/reset_peak_memory_stats()/synchronize, read with time.time(): full marks
"""Bài tập 2, kiểu AMP recipe: start_timer() / end_timer()."""

import gc
import time

import torch

start_time = None


def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def start_timer(device):
    global start_time
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    elif device.type == "mps":
        torch.mps.empty_cache()
    _synchronize(device)
    start_time = time.time()


def end_timer(device):
    _synchronize(device)
    end_time = time.time()
    return end_time - start_time


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b  # warm-up
    start_timer(device)
    for _ in range(repeats):
        a @ b
    return end_timer(device) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
