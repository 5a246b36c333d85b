"""Exercise 3's helpers: calling roundtrip() on a device, and the messages several checks share."""

from __future__ import annotations

import numpy
import torch

from grader.judge.api import Device, LearnerModule, array_equal, fail, ndarray_type, same_values, tensor_type, type_name

MESSAGES = {
    "ex3.not_a_tensor": {
        "vi": "roundtrip() phải trả về torch.Tensor, nhận được {got}.",
        "en": "roundtrip() must return a torch.Tensor, got {got}.",
    },
    "ex3.wrong_values": {
        "vi": "roundtrip() trả về {got}…, không phải x * 2 + 1 của đầu vào: tính x * 2 + 1 trên device.",
        "en": "roundtrip() returned {got}…, which is not x * 2 + 1 of its input: compute x * 2 + 1 on the device.",
    },
    "ex3.non_blocking_not_synced": {
        "vi": "roundtrip() trả về bản copy non_blocking=True trước khi dữ liệu về tới CPU: copy device → host "
              "không chặn thì đến sau, nên phải synchronize() (torch.cuda / torch.mps / torch.accelerator) "
              "trước khi dùng — hoặc bỏ non_blocking ở chiều về.",
        "en": "roundtrip() returned a non_blocking=True copy before its data reached the CPU: a device→host copy "
              "that does not block lands later, so synchronize() (torch.cuda / torch.mps / torch.accelerator) "
              "before using it — or drop non_blocking on the way back.",
    },
    "ex3.not_ndarray": {
        "vi": "to_numpy() phải trả về numpy.ndarray, nhận được {got}.",
        "en": "to_numpy() must return a numpy.ndarray, got {got}.",
    },
    "ex3.numpy_wrong_values": {
        "vi": "to_numpy() trả về giá trị khác với giá trị của tensor.",
        "en": "to_numpy() returned different values from the tensor's.",
    },
}


def roundtrip(ex3: LearnerModule, dev: Device, x: torch.Tensor) -> torch.Tensor:
    """``ex3.roundtrip(x, dev.device)``, inside ``with dev:``; it must return a tensor."""
    result = ex3.roundtrip(x, dev.device)
    if not isinstance(result, tensor_type):
        fail("ex3.not_a_tensor", got=type_name(result))
    return result


def expect_array(result: object, expected: numpy.ndarray, device: str = "") -> None:
    """to_numpy()'s result: an ndarray with the tensor's values."""
    params = {"device": device} if device else {}
    if not isinstance(result, ndarray_type):
        fail("ex3.not_ndarray", got=type_name(result), **params)
    if not array_equal(result, expected):
        fail("ex3.numpy_wrong_values", **params)


def _unsynced_copy(dev: Device) -> bool:
    """A device→host copy made with non_blocking=True, and no synchronize after it."""
    kinds = [e.kind for e in dev.events]
    return "d2h_async" in kinds and "sync" not in kinds[len(kinds) - kinds[::-1].index("d2h_async"):]


def expect_values(dev: Device, result: torch.Tensor, expected: torch.Tensor) -> None:
    """roundtrip()'s result holds x * 2 + 1; wrong values from an unsynchronized copy say so."""
    if same_values(result, expected):
        return
    if _unsynced_copy(dev):
        fail("ex3.non_blocking_not_synced", device=dev.label)
    # What it returned, never what it should have: the input is this grading's, and the answer
    # is for the learner to compute (grader/reference/draws.py).
    fail("ex3.wrong_values", device=dev.label, got=result.detach().cpu().flatten()[:4].tolist())
