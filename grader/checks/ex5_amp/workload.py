"""Models and data for ex5, the grader's reference loop, and how a run is observed."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
import torch
from torch import nn

from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import LearnerRaised, fail
from grader.checks.support.trusted import is_number

PLACEMENT_ERROR = "Expected all tensors to be on the same device"


def make_problem(batch: int, features: int, hidden: int, classes: int = 10,
                 seed: int = 5) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, classes))
    return model, torch.randn(batch, features, generator=gen), torch.randint(0, classes, (batch,), generator=gen)


def reference_fp32(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, steps: int) -> list[float]:
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


@dataclass
class ScalerCalls:
    scale: int = 0
    step: int = 0
    update: int = 0
    deprecated: list[str] = field(default_factory=list)


@contextmanager
def watch_amp(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScalerCalls]:
    """Count GradScaler calls and any use of the deprecated torch.cuda.amp classes."""
    calls = ScalerCalls()
    scaler = torch.amp.GradScaler
    for name in ("scale", "step", "update"):
        original = getattr(scaler, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            setattr(calls, _name, getattr(calls, _name) + 1)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(scaler, name, counted)
    for cls_name in ("autocast", "GradScaler"):
        cls = getattr(torch.cuda.amp, cls_name, None)
        if cls is None:
            continue
        original_init = cls.__init__

        def init(self, *args, _name=cls_name, _original=original_init, **kwargs):  # type: ignore[no-untyped-def]
            calls.deprecated.append(f"torch.cuda.amp.{_name}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", init)
    yield calls


def train(ex5: LearnerModule, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor,  # noqa: PLR0917
          device: torch.device, steps: int, amp_dtype: torch.dtype | None, *, strict: bool = False) -> list[float]:
    """Run the learner's loop; a placement mistake or a wrong return type becomes its message.

    Only ``strict`` callers (the FP32 check) charge losses returned as tensors: the other
    checks read them as floats, so that one mistake does not cost the whole exercise.
    """
    try:
        losses = ex5.train_steps(model, inputs, targets, device, steps=steps, amp_dtype=amp_dtype)
    except LearnerRaised as raised:
        if PLACEMENT_ERROR in raised.exc_text:
            if next(model.parameters()).device.type != device.type:
                fail("ex5.model_not_moved", got=next(model.parameters()).device.type, expected=device.type)
            fail("ex5.data_not_moved", where=raised.where)
        raise
    if not isinstance(losses, list) or len(losses) != steps:
        fail("ex5.not_list", got=repr(losses)[:60], steps=steps)
    if any(isinstance(v, torch.Tensor) for v in losses):
        if strict:
            fail("ex5.loss_tensor")
        losses = [v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for v in losses]
    if not all(is_number(v) for v in losses):
        fail("ex5.not_floats", got=repr(losses[:2])[:60])
    return [float(v) for v in losses]
