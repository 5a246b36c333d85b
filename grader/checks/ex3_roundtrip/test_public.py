"""Exercise 3, public checks: roundtrip's values; to_numpy on a CPU tensor."""

from __future__ import annotations

from collections.abc import Callable

import numpy
import torch

from grader.checks.support.devices import Accelerator
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail
from grader.checks.support.trusted import array_equal, ndarray_type, same_values, tensor_type


def test_roundtrip_values(ex3: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    x = torch.arange(10, dtype=torch.float32)
    expected = torch.arange(10, dtype=torch.float32) * 2 + 1
    with accel() as acc:
        result = ex3.roundtrip(x, acc.device)
    if not isinstance(result, tensor_type):
        fail("ex3.not_a_tensor", got=type(result).__name__)
    if not same_values(result, expected):
        fail("ex3.wrong_values", got=result.detach().cpu().flatten()[:4].tolist(), expected="[1.0, 3.0, 5.0, 7.0]")


def test_to_numpy_cpu(ex3: LearnerModule, cpu: torch.device) -> None:
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    expected = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    result = ex3.to_numpy(t)
    if not isinstance(result, ndarray_type):
        fail("ex3.not_ndarray", got=type(result).__name__)
    if not array_equal(result, expected):
        fail("ex3.numpy_wrong_values")
