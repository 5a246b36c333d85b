# idiom: timm — timm/benchmark.py "BenchmarkRunner.__init__" (time_fn) + "InferenceBenchmarkRunner.run" (_step, num_warm_iter)
# source: https://github.com/huggingface/pytorch-image-models/blob/main/benchmark.py
# shows: warm-up steps that are timed like every step (time_fn around each _step) and then discarded are a warm-up: full marks
"""Bài tập 2, kiểu timm benchmark.py: time_fn, _step, warm-up bằng chính _step."""

import time
from functools import partial

import torch


def timestamp(sync=False):
    return time.perf_counter()


def device_timestamp(sync=False, device=None):
    # timm's cuda_timestamp, for any accelerator: wait for the queue before reading the clock
    if sync:
        if device.type == "cuda":
            torch.cuda.synchronize(device=device)
        elif device.type == "mps":
            torch.mps.synchronize()
    return time.perf_counter()


class MatmulBenchmarkRunner:
    def __init__(self, n, device, num_warm_iter=1, num_bench_iter=5):
        self.n = n
        self.device = device
        self.num_warm_iter = num_warm_iter
        self.num_bench_iter = num_bench_iter
        self.example_inputs = None
        # timm: `if 'cuda' in self.device: ... cuda_timestamp` -- here every accelerator syncs
        if device.type != "cpu":
            self.time_fn = partial(device_timestamp, device=device)
        else:
            self.time_fn = timestamp

    def _init_input(self):
        self.example_inputs = (
            torch.randn((self.n, self.n), device=self.device, dtype=torch.float32),
            torch.randn((self.n, self.n), device=self.device, dtype=torch.float32),
        )

    def run(self):
        def _step():
            t_step_start = self.time_fn()
            a, b = self.example_inputs
            _ = a @ b
            t_step_end = self.time_fn(True)
            return t_step_end - t_step_start

        self._init_input()
        for _ in range(self.num_warm_iter):
            _step()  # timed like the others, the result is thrown away

        total_step = 0.0
        for _ in range(self.num_bench_iter):
            total_step += _step()
        return dict(step_time=total_step / self.num_bench_iter, n=self.n)


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    bench = MatmulBenchmarkRunner(n, device, num_warm_iter=1, num_bench_iter=repeats)
    results = bench.run()
    return results["step_time"]


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
