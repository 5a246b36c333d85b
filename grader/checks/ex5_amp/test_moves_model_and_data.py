"""ex5.moves_model_and_data: the model and the batch go to the device the loop was given (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex5_amp.workload import model_device, small, train
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại mục lỗi device mismatch.",
    "en": "Reread \"Lỗi device mismatch\".",
}


def test_moves_model_and_data(ex5: LearnerModule, devices: Callable[..., list[Device]], draw: Draw) -> None:
    for dev in devices("cuda", "mps"):
        with dev:
            problem = dev.build("ex5.problem", *small(draw))
            train(ex5, dev, problem, 1, None)
            where = model_device(dev, problem[0], trained=True)
        if where != dev.device.type:
            fail("ex5.model_not_moved", device=dev.label, got=where, expected=dev.device.type)
