"""Exercise 3, hidden checks: work done on the device, result back on the CPU, dtype kept,
input untouched, to_numpy for tensors that require grad or live on the accelerator."""

from __future__ import annotations

from collections.abc import Callable

import numpy
import torch

from grader.checks.support.devices import Accelerator, holds_dtype
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import LearnerRaised, fail
from grader.checks.support.trusted import array_equal, clone, ndarray_type, same_values, tensor_type


def _roundtrip(ex3: LearnerModule, acc: Accelerator, x: torch.Tensor) -> torch.Tensor:
    result = ex3.roundtrip(x, acc.device)
    if not isinstance(result, tensor_type):
        fail("ex3.not_a_tensor", got=type(result).__name__)
    return result


def test_roundtrip_computes_on_device(ex3: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    x = torch.arange(12, dtype=torch.float32)
    with accel() as acc:
        _roundtrip(ex3, acc, x)
        ops = [e for e in acc.events if e.kind in ("op", "matmul")]
    if not ops:
        fail("ex3.no_compute")
    if not any(e.device == acc.device.type for e in ops):
        fail("ex3.to_not_assigned")


def test_roundtrip_returns_cpu(ex3: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with accel() as acc:
        result = _roundtrip(ex3, acc, torch.ones(4))
        where = result.device.type
    if where != "cpu":
        fail("ex3.left_on_device", got=where)


def test_roundtrip_keeps_dtype(ex3: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    for dtype in (torch.float64, torch.int64, torch.float16):
        x = torch.arange(8).to(dtype)
        expected = torch.arange(8).to(dtype) * 2 + 1
        with accel() as acc:
            if not holds_dtype(acc.mode, dtype):
                continue  # float64 on an Apple GPU: MPS has none, .to("mps") itself would fail
            result = _roundtrip(ex3, acc, x)
        if result.dtype != dtype:
            fail("ex3.dtype_changed", given=dtype, got=result.dtype)
        if not same_values(result, expected):
            fail("ex3.wrong_values", got=result.flatten()[:4].tolist(), expected=expected[:4].tolist())


def test_roundtrip_input_unchanged(ex3: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    # To the accelerator .to() copies; to the CPU it returns x itself, where in-place ops
    # (x = x.to(device); x.mul_(2)) would change the caller's tensor.
    with accel() as acc:
        for device in (acc.device, torch.device("cpu")):
            x = torch.arange(10, dtype=torch.float32)
            private = clone(x)
            ex3.roundtrip(x, device)
            if x.device.type != "cpu" or not same_values(x, private):
                fail("ex3.input_modified")


def test_to_numpy_grad_and_device(ex3: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    expected = numpy.arange(5, dtype=numpy.float32)
    with accel() as acc:
        cases = (("ex3.numpy_requires_grad", torch.arange(5, dtype=torch.float32, requires_grad=True)),
                 ("ex3.numpy_on_device", torch.arange(5, dtype=torch.float32, device=acc.device)))
        for message_id, tensor in cases:
            try:
                result = ex3.to_numpy(tensor)
            except LearnerRaised as raised:
                fail(message_id, error=raised.exc_text)
            if not isinstance(result, ndarray_type) or not array_equal(result, expected):
                fail("ex3.numpy_wrong_values")
