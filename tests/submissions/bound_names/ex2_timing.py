"""Bài tập 2, bound-names style: `from time import perf_counter`, `from torch.cuda import synchronize`."""

from time import perf_counter

from torch import device as Device
from torch import randn
from torch.cuda import synchronize as cuda_synchronize
from torch.mps import synchronize as mps_synchronize


def _wait(device: Device) -> None:
    if device.type == "cuda":
        cuda_synchronize()
    elif device.type == "mps":
        mps_synchronize()


def time_matmul(n: int, device: Device, repeats: int = 5) -> float:
    a = randn(n, n, device=device)
    b = randn(n, n, device=device)
    a @ b  # warm-up
    _wait(device)
    start = perf_counter()
    for _ in range(repeats):
        a @ b
    _wait(device)
    return (perf_counter() - start) / repeats


def speedup(n: int, device: Device, repeats: int = 5) -> float:
    return time_matmul(n, Device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
