"""The objects a check hands the learner's functions — models, batches, optimizers, loss
functions — built the same way in both processes from a recipe (a name and plain arguments).

A check cannot send a model across the process boundary, and would not want to: it sends the
recipe, the learner process builds the objects on the device the check asked for and calls the
learner's function with them, and the judge builds its own copy to compute the reference (the
same seeds give the same weights in both processes). After the call the learner process reports
the model's state (its parameters, and the device they ended on) for the judge to compare.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from grader.wire.messages import RecipeName
from grader.wire.values import encode_tensor

EX4_BATCH = 602  # halves to 301, then 150 (or 151): at 150 the last micro-batch holds 2 samples
NOT_OOM = "grader's test error: mat1 and mat2 shapes cannot be multiplied (not an out-of-memory error)"


def ex4_problem(device: torch.device, seed: int = 14) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The back-off step's model and batch; ``seed``: the grading's (grader/reference/draws.py)."""
    gen = torch.Generator().manual_seed(seed)
    # Wide and shallow: activations (batch x 2048) dominate the weights, so the peak memory
    # of a step halves with the micro-batch and a budget can tell the sizes apart.
    model = nn.Sequential(nn.Linear(32, 2048), nn.ReLU(), nn.Linear(2048, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    inputs = torch.randn(EX4_BATCH, 32, generator=gen)
    targets = torch.randint(0, 4, (EX4_BATCH,), generator=gen)
    return model.to(device), inputs.to(device), targets.to(device)


def ex4_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.5)


def ex4_reference_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, micro: int) -> float:
    """Gradient accumulation as the lesson teaches it, each chunk's loss scaled by its share."""
    optimizer = ex4_optimizer(model)
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro), strict=True):
        loss = nn.functional.cross_entropy(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def breaks_once() -> Callable[..., torch.Tensor]:
    """A loss function that raises a RuntimeError that is not an OOM, the first time only."""
    calls = {"n": 0}

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError(NOT_OOM)
        return nn.functional.cross_entropy(out, target)

    return loss_fn


def ex5_problem(batch: int, features: int, hidden: int, classes: int = 10,
                seed: int = 5) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, classes))
    return model, torch.randn(batch, features, generator=gen), torch.randint(0, classes, (batch,), generator=gen)


def ex5_reference_fp32(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, steps: int) -> list[float]:
    model = copy.deepcopy(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _ex4_parts(args: list[Any], device: torch.device) -> tuple[Any, ...]:
    """Model, inputs, targets on the device; an SGD optimizer. ``args``: the problem's seed, if any."""
    model, inputs, targets = ex4_problem(device, *[int(a) for a in args[:1]])
    return model, inputs, targets, ex4_optimizer(model)


def _ex5_parts(args: list[Any], device: torch.device) -> tuple[Any, ...]:
    """Model, inputs, targets on the CPU: the learner's loop moves them."""
    return ex5_problem(*args)


RECIPES: dict[RecipeName, Callable[[list[Any], torch.device], tuple[Any, ...]]] = {
    "ex4.problem": _ex4_parts,
    "ex5.problem": _ex5_parts,
    "loss.cross_entropy": lambda args, device: (nn.functional.cross_entropy,),
    "loss.breaks_once": lambda args, device: (breaks_once(),),
}


def build(name: RecipeName, args: list[Any], device: torch.device) -> tuple[Any, ...]:
    """The parts a recipe makes, in the learner process, on ``device`` (the session's device)."""
    return RECIPES[name](args, device)


def inspect(obj: Any, where: Callable[[torch.Tensor], str]) -> Any:
    """A built object's state after the learner's code had it, as plain data: a module's
    parameters and the device they are on (``where``: the session's answer)."""

    if isinstance(obj, torch.Tensor):
        return encode_tensor(obj, where)
    if not isinstance(obj, nn.Module):
        raise TypeError(f"cannot inspect a {type(obj).__name__}")
    with torch._C.DisableTorchFunction():
        params = list(obj.parameters())
        return {"$dict": [["device", where(params[0]) if params else "cpu"],
                          ["params", [encode_tensor(p, where) for p in params]]]}
