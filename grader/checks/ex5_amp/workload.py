"""Models and data for ex5, the grader's reference loop, how a run is observed, and the messages
several of its checks share."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.judge.api import (
    Built,
    Device,
    LearnerModule,
    LearnerRaised,
    LearnerSideFailed,
    Tampered,
    device_of,
    fail,
    is_number,
)
from grader.reference.draws import Draw
from grader.reference.problems import Fp32Training, ex5_problem, ex5_training_fp32

PLACEMENT_ERROR = "Expected all tensors to be on the same device"
SMALL = (64, 8, 32, 3)  # ex5.problem's batch, features, hidden, classes for the quick checks (measured at)


def small(draw: Draw) -> tuple[int, ...]:
    """This grading's quick problem: SMALL with the drawn batch (48-80) and weights and data from the
    drawn seed, so that no loss an earlier grading printed answers it."""
    return (draw.ex5_batch, *SMALL[1:], draw.ex5_seed)
MESSAGES = {
    # What cannot be true (the ``{what}`` of a tampered figure's message: grader/judge/outcomes.py Tampered).
    "ex5.tampered_fp32": {
        "vi": "{matmuls} phép matmul ở {dtype} mà loss và trọng số sau khi train giống hệt FP32 đến từng bit",
        "en": "{matmuls} matmuls in {dtype} whose losses and trained weights are exactly FP32's",
    },
    "ex5.tampered_params": {
        "vi": "model được báo là ở {where} nhưng tham số của nó lại ở {tags}",
        "en": "a model said to be on {where} whose parameters are on {tags}",
    },
    "ex5.tampered_no_product": {
        "vi": "model ở {where} mà không có phép nhân ma trận nào chạy ở đó",
        "en": "a model on {where} that ran no product there",
    },
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
    "ex5.model_cast": {
        "vi": "Model đã bị ép sang {dtype} (model.half() / model.to({dtype})): mixed precision giữ trọng số ở float32 "
              "và để torch.autocast(device_type=device.type, dtype=amp_dtype) chọn dtype cho từng phép tính — đừng "
              "đổi dtype của model hay của inputs.",
        "en": "The model was cast to {dtype} (model.half() / model.to({dtype})): mixed precision keeps the weights in "
              "float32 and lets torch.autocast(device_type=device.type, dtype=amp_dtype) pick each operation's dtype "
              "— do not change the dtype of the model or of the inputs.",
    },
    "ex5.no_autocast": {
        "vi": "Không matmul nào chạy ở {dtype}: bọc forward và loss trong torch.autocast(device_type=device.type, "
              "dtype=amp_dtype) — với mọi device, không chỉ cuda.",
        "en": "No matmul ran in {dtype}: wrap the forward pass and the loss in torch.autocast("
              "device_type=device.type, dtype=amp_dtype) — on every device, not only cuda.",
    },
}


def reference_fp32(args: tuple[int, ...], steps: int, lr: float) -> list[float]:
    """The losses of a plain Adam(lr) + CrossEntropyLoss loop on the problem ``ex5.problem`` builds from
    ``args`` (computed once per judge process: fp32_losses and the tampering rule both ask for it)."""
    return list(_reference_fp32(args, steps, lr).losses)


@functools.lru_cache(maxsize=4)
def _reference_fp32(args: tuple[int, ...], steps: int, lr: float) -> Fp32Training:
    model, inputs, targets = ex5_problem(*args)
    return ex5_training_fp32(model, inputs, targets, steps, lr)


@dataclass(frozen=True)
class Trained:
    """A training of the learner's loop: its losses, and (``autocast`` callers) the parameters it left,
    read back from the learner process."""

    losses: list[float]
    params: tuple[torch.Tensor, ...] | None = None


def train(ex5: LearnerModule, dev: Device, problem: tuple[Built, ...], steps: int,  # noqa: PLR0917
          amp_dtype: torch.dtype | None, *, lr: float | None = None, strict: bool = False,
          autocast: bool = False) -> Trained:
    """Run the learner's loop on a problem built in the learner process (inside ``with dev:``);
    a placement mistake or a wrong return type becomes its message. ``lr``: the grading's draw, for
    the checks that compare losses (the others leave the learner's default).

    Only ``strict`` callers (the FP32 check) charge losses returned as tensors: the other
    checks read them as floats, so that one mistake does not cost the whole exercise. ``autocast``
    callers (the checks that the 16-bit products come from autocast) charge a model cast to a 16-bit
    dtype first, whatever it led to: PyTorch's "Attempting to unscale FP16 gradients", losses of nan.
    """
    model, inputs, targets = problem
    try:
        extra = {} if lr is None else {"lr": lr}
        losses = ex5.train_steps(model, inputs, targets, dev.device, steps=steps, amp_dtype=amp_dtype, **extra)
    except LearnerRaised as raised:
        if PLACEMENT_ERROR in raised.exc_text:
            where = model_device(dev, model)
            if where != dev.device.type:
                fail("ex5.model_not_moved", got=where, expected=dev.device.type)
            fail("ex5.data_not_moved", where=raised.where)
        if autocast:
            with contextlib.suppress(LearnerSideFailed):  # (then the learner's own error is the message)
                refuse_cast(dev, model)
        raise
    params = refuse_cast(dev, model) if autocast else None
    if not isinstance(losses, list) or len(losses) != steps:
        fail("ex5.not_list", got=repr(losses)[:60], steps=steps)
    if any(isinstance(v, torch.Tensor) for v in losses):
        if strict:
            fail("ex5.loss_tensor")
        losses = [v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for v in losses]
    if not all(is_number(v) for v in losses):
        fail("ex5.not_floats", got=repr(losses[:2])[:60])
    return Trained([float(v) for v in losses], params)


def refuse_cast(dev: Device, model: Built) -> tuple[torch.Tensor, ...]:
    """A model whose parameters the learner's code cast to a 16-bit dtype (``model.half()``,
    ``model.to(amp_dtype)``) trains in 16 bits without autocast — its products are 16-bit, and the
    events say so: read back from the learner process, its parameters must still be float32."""
    params = tuple(dev.inspect(model)["params"])
    cast = sorted({str(p.dtype).removeprefix("torch.") for p in params
                   if p.is_floating_point() and p.dtype != torch.float32})
    if cast:
        fail("ex5.model_cast", device=dev.label, dtype=", ".join(cast))
    return params


def reduced_matmuls(dev: Device, dtype: torch.dtype) -> int:
    """How many matmuls ran in ``dtype`` (bfloat16, float16) on ``dev``."""
    return sum(1 for e in dev.events if e.kind == "matmul" and e.dtype == str(dtype))


# Two observations of one fact: matmuls that really ran in 16 bits move the training off FP32's. Measured
# (the reference loop, SMALL, 2-3 steps; largest relative gap over the steps): CPU float16 7.3e-6,
# CPU bfloat16 3.4e-5, the CUDA/MPS stand-ins' float16 8.4e-5 and bfloat16 5.1e-4; the same FP32
# loop again: 0 (the same kernels, bit for bit). Below 1e-7 — one float32 ulp — the losses are FP32's.
FP32_OWN = 1e-7
# How many steps the 16-bit checks train, and why the rule reads the weights too. A loss is one float32
# number, and the 16-bit rounding of the logits can leave it bit for bit where FP32 put it: each of the first
# float16 losses was FP32's in 0.6-0.8 % of draws, each bfloat16 one in 0.03-0.13 % (3000 draws). Grading
# seed 175871067181834 had the first two both on FP32's: with 2 steps and the losses alone, the reference
# solution lost ex5.fp16_uses_grad_scaler as "tampering" (tests/test_forgery_measurements.py grades that
# seed), so the checks trained 4 steps. Now the rule also reads the weights the training left, 1443 float32
# numbers: after two Adam steps (the second step's update is a ratio of two steps' gradients) an honest
# 16-bit training of the reference solution left at least 962 of them off FP32's (float16; bfloat16 1222) in
# every one of 200 draws on the CPU and on both stand-ins, and none bit for bit on FP32's in 3000 draws on the
# CPU, that seed's included; an FP32 loop left all of them on FP32's, bit for bit, in every draw, on all three
# (2026-12-06). Two steps instead of four: half of these trainings, ~12 % of a batch learner's CPU.
AMP_STEPS = 2


def really_reduced(dev: Device, dtype: torch.dtype, trained: Trained, problem: tuple[int, ...], lr: float) -> int:
    """The matmuls the events say ran in ``dtype``, checked against the training: events that claim
    16-bit products beside losses and weights that are exactly FP32's, from the same start, are Tampered."""
    claimed = reduced_matmuls(dev, dtype)
    if claimed and trained.params is not None:
        fp32 = _reference_fp32(problem, len(trained.losses), lr)
        losses = max(abs(got - want) / max(abs(want), 1e-12)
                     for got, want in zip(trained.losses, fp32.losses, strict=True)) < FP32_OWN
        weights = len(trained.params) == len(fp32.params) and all(
            got.shape == want.shape and got.dtype == want.dtype and torch.equal(got, want)
            for got, want in zip(trained.params, fp32.params, strict=True))
        if losses and weights:
            raise Tampered("ex5.tampered_fp32", matmuls=claimed, dtype=str(dtype).removeprefix("torch."))
    return claimed


def model_device(dev: Device, model: Built, *, trained: bool = False) -> str:
    """Where the model ended up, read back from the learner process: the device its parameters came
    back tagged with must be the one it names (two observations), and a model that ``trained`` on an
    accelerator ran its products there (a third), else Tampered."""
    state: dict[str, Any] = dev.inspect(model)
    where = state["device"]
    tags = {device_of(p) for p in state["params"]}
    if tags and tags != {where}:
        raise Tampered("ex5.tampered_params", where=where, tags=", ".join(sorted(tags)))
    products = any(e.kind == "matmul" and e.device == where for e in dev.events)
    if trained and where == dev.device.type != "cpu" and not products:
        raise Tampered("ex5.tampered_no_product", where=where)
    return str(where)


@dataclass
class Earlier:
    """What this grading's earlier ex5 checks saw on each device (by its label: a stand-in never answers
    for a real device), for a later check that would otherwise train again only to see the same thing:
    which deprecated AMP APIs a finished float16 training called (watched), and where a finished FP32
    training left its model. Only finished trainings are kept: one that raised, or that the learner's
    answer failed, is trained again by the check that reads it, which then says why in its own words; a
    check whose earlier one is not in the grading, or runs after it, trains on its own. One per judge
    process (one learner's grading: the ``earlier`` fixture, grader/checks/ex5_amp/conftest.py)."""

    deprecated: dict[str, tuple[str, ...]] = field(default_factory=dict)
    model_on: dict[str, str] = field(default_factory=dict)

    def saw_model(self, dev: Device, model: Built) -> None:
        """Where ``model`` ended after the training just run inside ``with dev:`` (``model_device``),
        kept unless reading it back failed or did not hold together: the check that reads it then
        trains again and says so itself, and this check's verdict never depends on it."""
        try:
            self.model_on[dev.label] = model_device(dev, model, trained=True)
        except (Tampered, LearnerSideFailed):
            return
