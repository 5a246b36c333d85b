# idiom: pytorch-benchmark (LukasHedegaard) — pytorch-benchmark pytorch_benchmark/benchmark.py "warm_up" + "measure_repeated_inference_timing" (t_inf list, np.array(...).mean())
# source: https://github.com/LukasHedegaard/pytorch-benchmark/blob/main/pytorch_benchmark/benchmark.py
# shows: per-run clock pairs collected in a list and averaged with numpy (no single clock pair spans all repeats): full marks
"""Bài tập 2, kiểu pytorch-benchmark: đo từng lần chạy rồi lấy trung bình bằng numpy."""

from time import time

import numpy as np
import torch


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def warm_up(fn, device, num_runs=1):
    for _ in range(num_runs):
        fn()
    _sync(device)


def measure_repeated_timing(fn, device, num_runs=5):
    t_inf = []
    for _ in range(num_runs):
        start_on_device = time()
        fn()
        _sync(device)  # the repo reads the clock here without it; its copy back to the CPU syncs later
        stop_on_device = time()
        t_inf.append(stop_on_device - start_on_device)
    s_per_batch = np.array(t_inf)
    return {"seconds_per_batch_mean": float(s_per_batch.mean()), "seconds_per_batch_std": float(s_per_batch.std())}


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    warm_up(lambda: a @ b, device, num_runs=max(1, repeats // 10))
    metrics = measure_repeated_timing(lambda: a @ b, device, num_runs=repeats)
    return metrics["seconds_per_batch_mean"]


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
