# mistake: ultralytics-style time_sync(): `if torch.cuda.is_available(): torch.cuda.synchronize()` then time.time() -- on a Mac CUDA is never available, so mps timings are never synchronized
# fails: ex2.synchronizes_before_reading_clock, ex2.returns_mean_not_total
# message: ex2.no_sync_before_stop
# idiom: ultralytics yolov5/yolov3 utils/torch_utils.py time_sync() (`# PyTorch-accurate time`); same class of bug as karpathy/nanochat PR #792
# source: https://github.com/ultralytics/yolov3/pull/1637
"""Bài tập 2 — kiểu ultralytics time_sync(): chỉ đồng bộ khi có CUDA."""

import time

import torch


def time_sync():
    # PyTorch-accurate time
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.time()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    _ = a @ b  # warm-up
    t0 = time_sync()
    for _ in range(repeats):
        _ = a @ b
    return (time_sync() - t0) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
