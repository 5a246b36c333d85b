"""ex5.moves_model_and_data: the model and the batch go to the device the loop was given (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex5_amp.workload import make_problem, train
from grader.checks.support.devices import Device
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail

HINT = {
    "vi": "Đọc lại mục lỗi device mismatch.",
    "en": "Reread \"Lỗi device mismatch\".",
}


def test_moves_model_and_data(ex5: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cuda", "mps"):
        model, inputs, targets = make_problem(64, 8, 32, 3)
        with dev:
            train(ex5, model, inputs, targets, dev.device, 1, None)
            where = next(model.parameters()).device.type
        if where != dev.device.type:
            fail("ex5.model_not_moved", device=dev.label, got=where, expected=dev.device.type)
