"""Which ops raise (or warn) under ``torch.use_deterministic_algorithms(True)``, on this machine's GPU
and on the cuda stand-in, side by side; prints a table, asserts nothing.

    python benchmarks/deterministic_probe.py

A learner's reproducibility snippet (``seed_everything`` in many Kaggle notebooks) turns deterministic
algorithms on; on CUDA, cuBLAS products then raise unless ``CUBLAS_WORKSPACE_CONFIG`` is ``:4096:8``
or ``:16:8`` (PyTorch reads it once, at the first product of the process), and some other kernels
raise whatever the variable says (``use_deterministic_algorithms``'s docstring lists them; it does not
list cuBLAS). Which of the lesson's ops do, on the PyTorch the device has, is not written anywhere
exactly enough to emulate from memory: this script measures it, in four scenarios, each in a fresh
process (the variable is cached per process):

- ``unset``: deterministic on, the variable unset;
- ``set``: the variable set in ``os.environ`` after ``import torch``, before any CUDA op (the snippet);
- ``late``: one product run on the device first (deterministic off), then the variable set and
  deterministic on — what a learner process that ran a product before the learner's top level would see;
- ``warn``: the variable unset, ``warn_only=True``.

Without CUDA the device column says so, and only the stand-in's is measured. The stand-in does not
emulate any of this yet (docs/gpu-validation.md): run this on the next lent GPU (benchmarks/gpu_session.sh).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("unset", "set", "late", "warn")
CONFIG = ":4096:8"


def _ops() -> dict[str, Callable[[Any], object]]:
    import torch
    import torch.nn.functional as F

    def linear(dtype: torch.dtype | None) -> Callable[[Any], object]:
        def run(d: Any) -> object:
            layer = torch.nn.Linear(32, 16).to(d)
            x = torch.randn(8, 32, device=d)
            if dtype is None:
                return layer(x).sum().backward()
            with torch.autocast(device_type=torch.device(d).type, dtype=dtype):
                return layer(x).float().sum().backward()
        return run

    def cross_entropy(backward: bool) -> Callable[[Any], object]:
        def run(d: Any) -> object:
            logits = torch.randn(8, 3, device=d, requires_grad=True)
            loss = F.cross_entropy(logits, torch.tensor([0, 1, 2, 0, 1, 2, 0, 1], device=d))
            return loss.backward() if backward else loss.item()
        return run

    def randn(*shape: int) -> Callable[[Any], torch.Tensor]:
        return lambda d: torch.randn(*shape, device=d)

    a, b, v, t3 = randn(16, 16), randn(16, 16), randn(16), randn(2, 16, 16)
    return {
        "mm": lambda d: a(d) @ b(d),
        "addmm": lambda d: torch.addmm(a(d), a(d), b(d)),
        "bmm": lambda d: torch.bmm(t3(d), t3(d)),
        "matmul 3-d @ 2-d": lambda d: t3(d) @ a(d),
        "mv": lambda d: a(d) @ v(d),
        "dot": lambda d: v(d) @ v(d),
        "Linear fp32 + backward": linear(None),
        "Linear bf16 autocast + backward": linear(torch.bfloat16),
        "Linear fp16 autocast + backward": linear(torch.float16),
        "cross_entropy": cross_entropy(False),
        "cross_entropy backward": cross_entropy(True),
        "nll_loss 2-d (N, C, H, W)": lambda d: F.nll_loss(randn(2, 3, 4, 4)(d).log_softmax(1),
                                                          torch.zeros(2, 4, 4, dtype=torch.long, device=d)),
        "index_add_": lambda d: torch.zeros(4, device=d).index_add_(
            0, torch.tensor([0, 0, 1], device=d), torch.ones(3, device=d)),
        "scatter_add_": lambda d: torch.zeros(4, device=d).scatter_add_(
            0, torch.tensor([0, 0, 1], device=d), torch.ones(3, device=d)),
        "cumsum float": lambda d: v(d).cumsum(0),
        "sum": lambda d: v(d).sum(),
        "to(cpu)": lambda d: v(d).cpu(),
    }


def _outcome(run: Callable[[Any], object], device: Any) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run(device)
        except Exception as exc:  # noqa: BLE001 - what raised is the figure
            return f"raises {type(exc).__name__}: {' '.join(str(exc).split())[:90]}"
    deterministic = [w for w in caught if "determinis" in str(w.message).lower()]
    if deterministic:
        return f"warns: {' '.join(str(deterministic[0].message).split())[:90]}"
    return "ok"


def child(scenario: str, where: str) -> dict[str, str]:
    """One scenario in this (fresh) process: ``where`` is ``cuda`` (the device) or ``standin``."""
    import torch

    sys.path.insert(0, str(ROOT))
    device: Any
    if where == "cuda":
        device = torch.device("cuda")
        enter: Callable[[], object] = lambda: None  # noqa: E731
    else:
        from grader.emulation.standin import StandIn

        standin = StandIn("cuda")
        device = standin.device
        enter = standin.__enter__
    enter()
    if scenario == "late":
        (torch.randn(4, 4, device=device) @ torch.randn(4, 4, device=device)).sum().item()
    if scenario in ("set", "late"):
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CONFIG
    torch.use_deterministic_algorithms(True, warn_only=scenario == "warn")
    return {name: _outcome(run, device) for name, run in _ops().items()}


def main() -> int:
    if len(sys.argv) == 3:
        print(json.dumps(child(sys.argv[1], sys.argv[2])))
        return 0
    import torch

    has_cuda = torch.cuda.is_available()
    print(f"torch {torch.__version__}; CUDA: {has_cuda and torch.cuda.get_device_name(0)}")
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    columns: dict[tuple[str, str], dict[str, str]] = {}
    for scenario in SCENARIOS:
        for where in (("cuda", "standin") if has_cuda else ("standin",)):
            proc = subprocess.run([sys.executable, __file__, scenario, where], capture_output=True, text=True,
                                  env=env, timeout=300, check=False)
            lines = proc.stdout.strip().splitlines()
            columns[scenario, where] = (json.loads(lines[-1]) if proc.returncode == 0 and lines
                                        else {"(process)": f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"})
    names = list(_ops())
    for scenario in SCENARIOS:
        print(f"\n## {scenario}\n\n| op | device | stand-in | same? |\n|---|---|---|---|")
        device = columns.get((scenario, "cuda"), {})
        standin = columns[scenario, "standin"]
        for name in names if "(process)" not in standin else ["(process)"]:
            got = device.get(name, "no CUDA here")
            same = "" if not has_cuda else ("yes" if got.split(":")[0] == standin.get(name, "").split(":")[0]
                                            else "**no**")
            print(f"| {name} | {got} | {standin.get(name, '')} | {same} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
