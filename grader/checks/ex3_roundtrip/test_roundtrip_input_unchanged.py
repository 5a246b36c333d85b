"""ex3.roundtrip_input_unchanged: x is left as it was — `x = x.to(device); x.mul_(2)` changes the
caller's tensor when x is already on that device (public)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.judge.api import Device, LearnerModule, clone, device_of, fail, same_values

HINT = {
    "vi": "Đọc lại: nếu tensor đã ở đúng device, .to() trả lại chính tensor đó.",
    "en": "Reread: if the tensor is already on the device, .to() returns the same tensor.",
}
MESSAGES = {
    "ex3.input_modified": {
        "vi": "roundtrip() làm thay đổi input x: nếu tensor đã ở đúng device, .to() trả lại chính x, nên op "
              "in-place (mul_, +=) sửa luôn tensor của người gọi. Dùng op không in-place.",
        "en": "roundtrip() changed its input x: tensor.to() on the same device returns x itself, so in-place ops "
              "(mul_, +=) modify the caller's tensor. Use out-of-place ops.",
    },
}


def test_roundtrip_input_unchanged(ex3: LearnerModule, devices: Callable[..., list[Device]]) -> None:
    # To an accelerator .to() copies; to the CPU it returns x itself.
    for dev in devices("cpu", "cuda", "mps"):
        x = torch.arange(10, dtype=torch.float32)
        private = clone(x)
        with dev:
            ex3.roundtrip(x, dev.device)  # x comes back as the learner's function left it
        if device_of(x) != "cpu" or not same_values(x, private):
            fail("ex3.input_modified", device=dev.label)
