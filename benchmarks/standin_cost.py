"""What a training step costs on a stand-in, against the floor of the layers it is built at; prints a
Markdown table.

    python benchmarks/standin_cost.py [--repeats 3] [--trainings 10]

The stand-in (grader/emulation/standin.py) is a TorchFunctionMode (its tensors' Python surface)
and a TorchDispatchMode (every aten op), both in Python. Each row trains ex5's reference solution
(solutions/ex5_amp.py, ``train_steps``, 4 steps) on the small problem the quick ex5 checks use, in
FP32, FP16 (autocast + GradScaler) and BF16 (autocast), and prints the CPU milliseconds of one
training (the best of ``--repeats`` runs of ``--trainings`` each, this process's CPU time):

* ``cpu``: PyTorch alone, the learner's loop on the CPU;
* ``two do-nothing modes``: the same inside a TorchFunctionMode and a TorchDispatchMode that only
  call the function on — the price of the two layers themselves, which any emulation built there pays;
* ``cuda stand-in``, ``mps stand-in``: a session of each, opened for each training as a check opens one.

A stand-in's cost less the do-nothing modes' is its own logic: placement, the timeline's accounting,
autocast's policy kernels (registered when a session first turns autocast on), products widened as a
GPU computes them. docs/performance.md reads these figures.

Then what one more small device tensor costs with many alive (``HELD``): the stand-in counts its live
bytes at every op that allocates, and that count must not grow with the tensors a learner holds.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.checks.ex5_amp.workload import SMALL  # noqa: E402 - after the path is set
from grader.emulation.standin import StandIn  # noqa: E402
from grader.reference.problems import ex5_problem  # noqa: E402

STEPS = 4
HELD = (1000, 4000, 16000)  # small device tensors alive at once
PROBLEM = (*SMALL, 1234)  # the quick ex5 checks' problem, a fixed seed
DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


class _PassFunctions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


class _PassOps(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as the stand-in's mode: no torch._dynamo import on its first call

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _cpu() -> Iterator[torch.device]:
    yield torch.device("cpu")


@contextlib.contextmanager
def _do_nothing_modes() -> Iterator[torch.device]:
    with _PassFunctions(), _PassOps():  # type: ignore[no-untyped-call]
        yield torch.device("cpu")


@contextlib.contextmanager
def _standin(kind: str) -> Iterator[torch.device]:
    with StandIn(kind) as standin:  # type: ignore[arg-type]
        yield standin.device


PLACES: dict[str, Callable[[], contextlib.AbstractContextManager[torch.device]]] = {
    "cpu": _cpu,
    "two do-nothing modes": _do_nothing_modes,
    "cuda stand-in": lambda: _standin("cuda"),
    "mps stand-in": lambda: _standin("mps"),
}


def _solution() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ex5_amp_reference", ROOT / "solutions" / "ex5_amp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _training_ms(train_steps: Any, place: Callable[[], contextlib.AbstractContextManager[torch.device]],
                 dtype: torch.dtype | None, repeats: int, trainings: int) -> float:
    def once() -> None:
        model, inputs, targets = ex5_problem(*PROBLEM)
        with place() as device:
            train_steps(model, inputs, targets, device, steps=STEPS, amp_dtype=dtype)

    once()  # the first training of a process pays one-time costs (kernels' first calls, lazy imports)
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(trainings):
            once()
        best = min(best, (time.process_time() - start) / trainings)
    return best * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trainings", type=int, default=10)
    args = parser.parse_args()
    train_steps = _solution().train_steps
    torch.set_num_threads(1)  # one core's figures, as a batch worker gets its part of the cores
    print(f"one {STEPS}-step training of ex5's small problem {PROBLEM[:4]}, CPU ms (best of {args.repeats} x "
          f"{args.trainings}; torch {torch.__version__}, one thread)\n")
    print("| where | " + " | ".join(DTYPES) + " |")
    print("|---|" + "---:|" * len(DTYPES))
    for label, place in PLACES.items():
        cells = [f"{_training_ms(train_steps, place, dtype, args.repeats, args.trainings):.1f}"
                 for dtype in DTYPES.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\nsmall device tensors made and held on the cuda stand-in, CPU microseconds a tensor (best of "
          f"{args.repeats})\n")
    print("| held | " + " | ".join(str(n) for n in HELD) + " |")
    print("|---|" + "---:|" * len(HELD))
    print("| µs a tensor | " + " | ".join(f"{_held_us(n, args.repeats):.1f}" for n in HELD) + " |")
    return 0


def _held_us(count: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        with _standin("cuda") as device:
            start = time.process_time()
            held = [torch.ones(4, device=device) for _ in range(count)]
            best = min(best, time.process_time() - start)
            del held
    return best / count * 1e6


if __name__ == "__main__":
    sys.exit(main())
