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
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.optim.adam import adam
from torch.optim.sgd import sgd

from grader.reference import modes
from grader.wire.messages import RecipeName
from grader.wire.values import encode_tensor

EX4_SEED = 14  # the back-off problem's seed where no grading drew one (the memory budget: its shapes alone)
EX4_BATCH = 602  # halves to 301, then 150 (or 151): at 150 the last micro-batch holds 2 samples
EX4_LR = 0.5  # the SGD the back-off step is handed
EX5_LR = 1e-3  # train_steps's default lr (the contract's); the checks draw theirs (grader/reference/draws.py)
NOT_OOM = "grader's test error: mat1 and mat2 shapes cannot be multiplied (not an out-of-memory error)"


def ex4_problem(device: torch.device, seed: int = EX4_SEED) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The back-off step's model and batch; ``seed``: the grading's (grader/reference/draws.py)."""
    params, inputs, targets = _ex4_drawn(seed)
    # Wide and shallow: activations (batch x 512) dominate the weights, so the peak memory
    # of a step halves with the micro-batch and a budget can tell the sizes apart.
    model = nn.Sequential(nn.Linear(32, 512), nn.ReLU(), nn.Linear(512, 4))
    with torch.no_grad():
        for param, drawn in zip(model.parameters(), params, strict=True):
            param.copy_(drawn)
    return model.to(device), inputs.clone().to(device), targets.clone().to(device)


@functools.lru_cache(maxsize=4)
def _ex4_drawn(seed: int) -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor]:
    """The back-off problem of ``seed`` as drawn: its parameters (in ``model.parameters()``'s order),
    inputs and targets, once per process — ex4's checks build the same draw about five times a grading,
    and keeping it clear of ReLU's kink costs ~1.6 ms a draw. Never handed out: each build copies it."""
    gen = torch.Generator().manual_seed(seed)
    params = tuple(torch.randn(shape, generator=gen) * 0.05 for shape in ((512, 32), (512,), (4, 512), (4,)))
    inputs = torch.randn(EX4_BATCH, 32, generator=gen)
    targets = torch.randint(0, 4, (EX4_BATCH,), generator=gen)
    _clear_of_kinks(params[0], params[1], inputs)
    return params, inputs, targets


# How far from ReLU's kink every hidden unit's input stays, for every sample of the back-off problem.
# The check compares weights after one step; the gradient of ReLU jumps at 0, so where a unit's input
# sits within a device's rounding of 0 (float32 matrix products of one machine and another differ by
# ~1e-7 here), one sample's share of that unit's gradient is in on one device and out on the other:
# one row of the first layer then differs by ~2e-4, over the check's 1e-4 (on an H200, 3 correct
# gradings in ~350 lost the check so, each on a draw with an input 1e-8 from 0; docs/gpu-validation.md).
# Inputs are ~0.3 wide; 1e-5 is 100 times the rounding.
KINK_MARGIN = 1e-5


def _clear_of_kinks(weight: torch.Tensor, bias: torch.Tensor, inputs: torch.Tensor) -> None:
    """Move each hidden unit whose input comes within ``KINK_MARGIN`` of 0 for some sample to the
    nearest bias (steps of 3 margins: +1, -1, +2, -2, ... well under the biases' 0.05) where none
    does: the problem is drawn the same in every process, and one step's gradients on it are
    smooth in the rounding of whatever device computes them."""
    with torch.no_grad():
        drawn = bias.clone()
        # Decided in float64 (float32's products are exact there, the sums round at ~1e-17): the judge and
        # the learner process build the problem apart, with other thread counts, and a float32 product's
        # rounding (~1e-7) could put a unit on either side of the margin in each: two different problems.
        # float32 only picks the units that can be near (a few in 512; the float64 product of all costs
        # ~2 ms a build); one it picks in one process and not the other is over the margin in both.
        rough = (inputs @ weight.T + bias).abs().min(0).values
        units = (rough < 2 * KINK_MARGIN).nonzero().flatten()
        z = inputs.double() @ weight[units].double().T  # (samples, those units), without the bias
        for k in range(64):
            near = units[(z + bias[units].double()).abs().min(0).values < KINK_MARGIN]
            if len(near) == 0:
                return
            steps = (k + 2) // 2 * (1 if k % 2 == 0 else -1)
            bias[near] = drawn[near] + 3 * KINK_MARGIN * steps


def ex4_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """The optimizer the learner's back-off step is handed."""
    return torch.optim.SGD(model.parameters(), lr=EX4_LR)


def ex4_reference_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, micro: int) -> float:
    """Gradient accumulation as the lesson teaches it, each chunk's loss scaled by its share; then
    ``ex4_optimizer``'s step, taken as ``sgd_step`` (the same arithmetic, bit for bit)."""
    for p in model.parameters():
        p.grad = None
    total = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro), strict=True):
        loss = nn.functional.cross_entropy(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total += loss.item()
    sgd_step(list(model.parameters()), lr=EX4_LR)
    return total


# The judge's reference training calls torch.optim's functional steps, never an Optimizer: the first
# Optimizer.step() of a process imports torch._dynamo (torch/optim/optimizer.py,
# _use_grad_for_differentiable; with sympy, ~850 modules, 2.5-3 CPU-s), for compilation the judge never
# does. The functional steps are the code Optimizer.step() itself runs (the default single-tensor path on
# the CPU), so the results are the same bit for bit (tests/test_reference.py).


def sgd_step(params: list[torch.Tensor], lr: float) -> None:
    """What ``torch.optim.SGD(params, lr=lr).step()`` does (no momentum, no weight decay)."""
    with torch.no_grad():
        live = [p for p in params if p.grad is not None]
        sgd(live, [p.grad for p in live], [None] * len(live),  # type: ignore[misc]
                            weight_decay=0.0, momentum=0.0, lr=lr, dampening=0.0, nesterov=False, maximize=False)


class AdamSteps:
    """What ``torch.optim.Adam(params, lr=lr)``'s ``zero_grad()`` and ``step()`` do, without an Optimizer."""

    def __init__(self, params: list[torch.Tensor], lr: float) -> None:
        self.params = params
        self.lr = lr
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
        self.steps = [torch.tensor(0.0, dtype=torch.float32) for _ in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        with torch.no_grad():
            adam([self.params[i] for i in live], [self.params[i].grad for i in live],  # type: ignore[misc]
                                  [self.exp_avgs[i] for i in live], [self.exp_avg_sqs[i] for i in live], [],
                                  [self.steps[i] for i in live], amsgrad=False, beta1=0.9, beta2=0.999, lr=self.lr,
                                  weight_decay=0.0, eps=1e-8, maximize=False)


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
    # The layers draw their weights from the CPU's generator, the only one seeded here: torch.manual_seed
    # would also queue the seeding of CUDA and XPU in a process where they never start, formatting the
    # whole stack each time (1-2 % of a batch learner, built ~20 times; its check's reset seeds a real
    # accelerator's generator, grader/learner/runner.py).
    torch.default_generator.manual_seed(seed)
    model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, classes))
    return model, torch.randn(batch, features, generator=gen), torch.randint(0, classes, (batch,), generator=gen)


@dataclass(frozen=True)
class Fp32Training:
    """What a plain FP32 training of ex5's problem gives: its losses, and the parameters it leaves."""

    losses: tuple[float, ...]
    params: tuple[torch.Tensor, ...]


def ex5_training_fp32(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, steps: int,
                      lr: float = EX5_LR) -> Fp32Training:
    """A plain ``torch.optim.Adam(lr=lr)`` loop, taken as ``AdamSteps``, on a copy of ``model``."""
    model = copy.deepcopy(model)
    optimizer = AdamSteps(list(model.parameters()), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return Fp32Training(tuple(losses), tuple(p.detach() for p in model.parameters()))


def _ex4_parts(args: list[Any], device: torch.device) -> tuple[Any, ...]:
    """Model, inputs, targets on the device; an SGD optimizer. ``args``: the problem's seed, if any. Made on
    the host with the session's modes off (``_ex5_parts``), then moved with them on: the device's transfers,
    as the learner's code would."""
    with modes.off():
        model, inputs, targets = ex4_problem(torch.device("cpu"), *[int(a) for a in args[:1]])
    model, inputs, targets = model.to(device), inputs.to(device), targets.to(device)
    return model, inputs, targets, ex4_optimizer(model)


def _ex5_parts(args: list[Any], device: torch.device) -> tuple[Any, ...]:
    """Model, inputs, targets on the CPU: the learner's loop moves them. Made with the session's modes off
    (``modes.off``), as outside any session: through them each op of a model's initialization was classified,
    placed and accounted, for CPU tensors no check's events read (0.79 ms a build in a stand-in, 0.20 without;
    13 builds a batch learner)."""
    with modes.off():
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
