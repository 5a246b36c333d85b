# mistake: answers the multiple-choice question with A ("each GPU core is slower") instead of B
# fails: ex2.small_n_answer
# message: ex2.wrong_answer
"""Bài tập 2, kiểu code trong bài học."""

import time

import torch


def time_matmul(n, device, repeats=5):
    """Thời gian trung bình một phép a @ b. / Mean time of one a @ b."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)

    # Warm-up
    _ = a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()

    start = time.time()
    for _ in range(repeats):
        _ = a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()
    return (time.time() - start) / repeats


def speedup(n, device, repeats=3):
    """CPU time / device time."""
    cpu_t = time_matmul(n, torch.device("cpu"), repeats)
    gpu_t = time_matmul(n, device, repeats)
    return cpu_t / gpu_t


# Vì sao với N = 100, GPU thường chậm hơn CPU? -> core GPU yếu hơn core CPU
SMALL_N_ANSWER = "A"
