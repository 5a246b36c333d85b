"""Models and data for ex5, the grader's reference loop, how a run is observed, and the messages
several of its checks share."""

from __future__ import annotations

import torch

from grader.judge.api import Built, Device, LearnerModule, LearnerRaised, fail, is_number
from grader.reference.problems import ex5_problem, ex5_reference_fp32

PLACEMENT_ERROR = "Expected all tensors to be on the same device"
SMALL = (64, 8, 32, 3)  # ex5.problem's batch, features, hidden, classes for the quick checks
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


def reference_fp32(args: tuple[int, ...], steps: int) -> list[float]:
    """The losses of a plain Adam + CrossEntropyLoss loop on the problem ``ex5.problem`` builds from ``args``."""
    model, inputs, targets = ex5_problem(*args)
    return ex5_reference_fp32(model, inputs, targets, steps)


def train(ex5: LearnerModule, dev: Device, problem: tuple[Built, ...], steps: int,  # noqa: PLR0917
          amp_dtype: torch.dtype | None, *, strict: bool = False) -> list[float]:
    """Run the learner's loop on a problem built in the learner process (inside ``with dev:``);
    a placement mistake or a wrong return type becomes its message.

    Only ``strict`` callers (the FP32 check) charge losses returned as tensors: the other
    checks read them as floats, so that one mistake does not cost the whole exercise.
    """
    model, inputs, targets = problem
    try:
        losses = ex5.train_steps(model, inputs, targets, dev.device, steps=steps, amp_dtype=amp_dtype)
    except LearnerRaised as raised:
        if PLACEMENT_ERROR in raised.exc_text:
            where = dev.inspect(model)["device"]
            if where != dev.device.type:
                fail("ex5.model_not_moved", got=where, expected=dev.device.type)
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


def reduced_matmuls(dev: Device, dtype: torch.dtype) -> int:
    """How many matmuls ran in ``dtype`` (bfloat16, float16) on ``dev``."""
    return sum(1 for e in dev.events if e.kind == "matmul" and e.dtype == str(dtype))
