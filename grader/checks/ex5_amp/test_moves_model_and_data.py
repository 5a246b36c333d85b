"""ex5.moves_model_and_data: the model and the batch go to the device the loop was given (hidden).
Where fp32_losses finished a training on the device, it reads where that one left the model
(workload.Earlier) rather than training again."""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex5_amp.workload import Earlier, model_device, small, train
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại mục lỗi device mismatch.",
    "en": "Reread \"Lỗi device mismatch\".",
}


def test_moves_model_and_data(ex5: LearnerModule, devices: Callable[..., list[Device]], draw: Draw,
                              earlier: Earlier) -> None:
    for dev in devices("cuda", "mps"):
        where = earlier.model_on.get(dev.label)
        if where is None:
            with dev:
                problem = dev.build("ex5.problem", *small(draw))
                train(ex5, dev, problem, 1, None)
                where = model_device(dev, problem[0], trained=True)
        else:
            dev.graded_from_earlier()
        if where != dev.device.type:
            fail("ex5.model_not_moved", device=dev.label, got=where, expected=dev.device.type)
