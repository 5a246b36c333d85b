"""Private references to the torch functions checks compare with.

Taken when the checks are collected, before any learner module is imported, so a
submission that replaces ``torch.equal`` or ``torch.allclose`` at import cannot change a
verdict. Checks import comparison helpers from here, never from torch directly.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import numpy
import torch

equal = torch.equal
allclose = torch.allclose
isfinite = math.isfinite
tensor_type = torch.Tensor
ndarray_type = numpy.ndarray
array_equal = numpy.array_equal
clone = torch.Tensor.clone
detach = torch.Tensor.detach


# The helpers bind what they use as default arguments: a learner who replaces names in this
# module (or in torch) after the checks were collected changes nothing here.
def same_values(actual: torch.Tensor, expected: torch.Tensor, _equal: Any = equal, _detach: Any = detach) -> bool:
    """Equal shape and values; ``expected`` was computed before the learner's code ran."""
    return tuple(actual.shape) == tuple(expected.shape) and bool(_equal(_detach(actual).cpu(), expected))


def is_number(value: object, _isfinite: Any = isfinite) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and _isfinite(float(value))
