# idiom: PyTorch tutorials — pytorch/tutorials recipes/recipes/benchmark.py "Benchmarking with torch.utils.benchmark.Timer" + torch/utils/benchmark/utils/timer.py "Timer.timeit" (its own warm-up run)
# source: https://pytorch.org/tutorials/recipes/recipes/benchmark.html
# shows: Timer.timeit() warms up by itself (timed, discarded) and synchronizes the accelerator when it reads the clock; the contract allows Timer: full marks
"""Bài tập 2, kiểu torch.utils.benchmark.Timer (recipe "benchmark")."""

import torch
import torch.utils.benchmark as benchmark


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    t0 = benchmark.Timer(
        stmt="torch.mm(a, b)",
        globals={"a": a, "b": b},
        num_threads=torch.get_num_threads(),
        label="matmul",
        sub_label=f"{n}x{n}",
        description=device.type,
    )
    # Timer.timeit: warm-up run first, then `repeats` runs; synchronizes before reading its clock
    return t0.timeit(repeats).mean


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
