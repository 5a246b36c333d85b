# idiom: karpathy/nanochat — scripts/base_train.py: `synchronize = torch.cuda.synchronize if device_type == "cuda" else lambda: None` at the top of the script, chosen once from the detected device type (here with the MPS branch that nanochat's PR #792 added through get_sync_fn)
# source: https://github.com/karpathy/nanochat/blob/master/scripts/base_train.py
# shows: time_matmul() calls the module-level `synchronize` chosen at import for the machine's accelerator: full marks on a GPU and a Mac, where the module is imported
"""Bài tập 2, kiểu nanochat: synchronize chọn một lần khi import."""

import time

import torch

if torch.cuda.is_available():
    device_type = "cuda"
elif torch.backends.mps.is_available():
    device_type = "mps"
else:
    device_type = "cpu"
synchronize = {"cuda": torch.cuda.synchronize, "mps": torch.mps.synchronize}.get(device_type, lambda: None)


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b  # warm-up
    synchronize()
    t0 = time.time()
    for _ in range(repeats):
        a @ b
    synchronize()
    return (time.time() - t0) / repeats


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
