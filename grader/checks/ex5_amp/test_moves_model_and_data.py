"""ex5.moves_model_and_data: the model and the batch go to the device the loop was given (hidden)."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex5_amp.workload import SMALL, train
from grader.judge.api import Device, LearnerModule, fail

HINT = {
    "vi": "Đọc lại mục lỗi device mismatch.",
    "en": "Reread \"Lỗi device mismatch\".",
}


def test_moves_model_and_data(ex5: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    for dev in devices("cuda", "mps"):
        with dev:
            problem = dev.build("ex5.problem", *SMALL)
            train(ex5, dev, problem, 1, None)
            where = dev.inspect(problem[0])["device"]
        if where != dev.device.type:
            fail("ex5.model_not_moved", device=dev.label, got=where, expected=dev.device.type)
