"""Models and data for ex5, the grader's reference loop, how a run is observed, and the messages
several of its checks share."""

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
MESSAGES = {
    "ex5.data_not_moved": {
        "vi": "Một tensor và model ở hai device khác nhau ({where}): chuyển cả inputs và targets — inputs = "
              "inputs.to(device), targets = targets.to(device).",
        "en": "A tensor and the model are on different devices ({where}): move inputs and targets too — inputs = "
              "inputs.to(device), targets = targets.to(device).",
    },
    "ex5.model_not_moved": {
        "vi": "Model vẫn ở {got}: gọi model.to(device) (với module là in-place).",
        "en": "The model stayed on {got}: call model.to(device) (in-place for modules).",
    },
    "ex5.not_list": {
        "vi": "train_steps() phải trả về list có một loss cho mỗi bước ({steps}), nhận được {got}.",
        "en": "train_steps() must return a list with one loss per step ({steps}), got {got}.",
    },
    "ex5.loss_tensor": {
        "vi": "train_steps() trả về tensor: hãy append loss.item() (float của Python). Giữ tensor là giữ cả "
              "computation graph trong bộ nhớ.",
        "en": "train_steps() returned tensors: append loss.item() (a Python float). Keeping the tensor keeps its "
              "whole graph alive in memory.",
    },
    "ex5.not_floats": {
        "vi": "train_steps() phải trả về float của Python, nhận được {got}.",
        "en": "train_steps() must return Python floats, got {got}.",
    },
    "ex5.no_autocast": {
        "vi": "Không matmul nào chạy ở {dtype}: bọc forward và loss trong torch.autocast(device_type=device.type, "
              "dtype=amp_dtype) — với mọi device, không chỉ cuda.",
        "en": "No matmul ran in {dtype}: wrap the forward pass and the loss in torch.autocast("
              "device_type=device.type, dtype=amp_dtype) — on every device, not only cuda.",
    },
}


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
    """What the learner's GradScaler did: calls of an enabled scaler, and of a disabled one (a
    GradScaler("cuda") on another device turns itself off and scales nothing)."""

    scale: int = 0
    step: int = 0
    update: int = 0
    disabled: int = 0
    deprecated: list[str] = field(default_factory=list)


@contextmanager
def watch_amp(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScalerCalls]:
    """Count GradScaler calls and any use of the deprecated torch.cuda.amp classes."""
    calls = ScalerCalls()
    scaler = torch.amp.GradScaler
    for name in ("scale", "step", "update"):
        original = getattr(scaler, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            if self.is_enabled():
                setattr(calls, _name, getattr(calls, _name) + 1)
            else:
                calls.disabled += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(scaler, name, counted)
    for where, cls_name in (("cuda", "autocast"), ("cuda", "GradScaler"), ("cpu", "autocast"), ("cpu", "GradScaler")):
        cls = getattr(getattr(getattr(torch, where), "amp", None), cls_name, None)
        if cls is None:
            continue
        original_init = cls.__init__

        def init(self, *args, _name=f"torch.{where}.amp.{cls_name}", _original=original_init,  # type: ignore[no-untyped-def]
                 **kwargs):
            calls.deprecated.append(_name)
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


def reduced_matmuls(dev: object, dtype: torch.dtype) -> int:
    """How many matmuls ran in ``dtype`` (bfloat16, float16) on ``dev``."""
    return sum(1 for e in dev.events if e.kind == "matmul" and e.dtype == str(dtype))  # type: ignore[attr-defined]
