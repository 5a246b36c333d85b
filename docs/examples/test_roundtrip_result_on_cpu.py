"""ex3.roundtrip_result_on_cpu — an example check: the one file a new check is (README, "How to add a check").

Where it goes: ``grader/checks/ex3_roundtrip/test_roundtrip_result_on_cpu.py`` (the folder is the
exercise's module; the file name is ``test_`` + the check's id). Then one line in course.yaml under
exercise ex3, with points taken from another check of the course so that they still add up to 100:

    - {id: roundtrip_result_on_cpu, points: 1, visibility: hidden}

tests/test_examples.py installs it that way in a copy of the course and grades every correct style
(it must pass) and the mistake written for it, docs/examples/mistakes/ex3_roundtrip/
cpu_only_for_cuda.py (it must fail). It checks what the course's own roundtrip_returns_cpu checks:
it is the README's old sample, written so that it can fail.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex3_roundtrip.common import roundtrip  # the exercise's helper: a non-tensor fails there
from grader.judge.api import Device, LearnerModule, device_of, fail

# Which lesson section to reread, never the answer; shown with every failure of this check.
HINT = {
    "vi": "Đọc lại ba cách chuyển tensor: .cpu().",
    "en": "Reread the three ways to move a tensor: .cpu().",
}
# One entry per message id this module fails with, in both languages. {device} is added by the
# grader ("On mps (stand-in): ..."); {got} is this check's own parameter.
MESSAGES = {
    "ex3.result_not_on_cpu": {
        "vi": "roundtrip() trả về tensor nằm trên {got}: gọi .cpu() cho kết quả, với mọi device.",
        "en": "roundtrip() returned a tensor that lives on {got}: call .cpu() on the result, for every device.",
    },
}


def test_roundtrip_result_on_cpu(ex3: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    # Each kind the function can be handed: the real device where the machine has one, else its
    # stand-in on the CPU. Inside ``with dev:`` the learner's code runs on that device.
    for dev in devices("cuda", "mps"):
        with dev:
            result = roundtrip(ex3, dev, torch.ones(4))  # ex3.roundtrip(...), called in the learner process
        # The judge rebuilds every returned tensor on its own CPU: ``result.device`` is always cpu
        # here. device_of() is where the tensor lived in the learner process.
        where = device_of(result)
        if where != "cpu":
            fail("ex3.result_not_on_cpu", device=dev.label, got=where)
