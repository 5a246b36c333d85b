"""What a check imports: the one module a check author needs from the judge.

A check (grader/checks/<exercise module>/test_<id>.py) asks pytest for the learner's module
(``ex3``) and for ``devices``, calls the learner's functions through them, and ends with
``fail("<exercise>.<id>", **params)`` for each mistake. Values come back rebuilt from plain data
(grader/wire/values.py): compare them with the helpers below, taken before any learner code ran,
and ask where a returned tensor lived with ``device_of()`` — its ``.device`` is always the judge's
CPU. The course's own problems and reference computations are in grader/reference/.
"""

from __future__ import annotations

from grader.judge.ahead import same_for_every_grading
from grader.judge.devices import Device, RemoteWorld, real_accelerator_type, runs_amp
from grader.judge.outcomes import LearnerRaised, LearnerSideFailed, NotAttempted, Tampered, TimedOut, fail
from grader.judge.proxy import Built, LearnerModule
from grader.judge.trusted import allclose, array_equal, clone, is_number, ndarray_type, same_values, tensor_type
from grader.wire.codec import cut
from grader.wire.messages import DeviceKind, DeviceMode, Event, Hello, MiB, Smaller
from grader.wire.values import device_of, type_name

__all__ = [
    "Built", "Device", "DeviceKind", "DeviceMode", "Event", "Hello", "LearnerModule", "LearnerRaised",
    "LearnerSideFailed", "MiB", "NotAttempted", "RemoteWorld", "Smaller", "Tampered", "TimedOut", "allclose",
    "array_equal", "clone", "cut", "device_of", "fail", "is_number",
    "ndarray_type", "real_accelerator_type", "runs_amp", "same_for_every_grading", "same_values", "tensor_type",
    "type_name",
]
