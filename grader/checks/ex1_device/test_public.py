"""Exercise 1, public checks: pick_device returns a torch.device; describe_device's keys."""

from __future__ import annotations

import torch

from grader.checks.support.devices import real_accelerator_type
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail

KEYS = {"type", "name", "count", "capability", "total_memory_bytes"}


def test_pick_device_returns_device(ex1: LearnerModule) -> None:
    device = ex1.pick_device()
    if not isinstance(device, torch.device):
        fail("ex1.not_a_device", got=type(device).__name__, value=repr(device)[:60])
    expected = real_accelerator_type() or "cpu"
    if device.type != expected:
        fail("ex1.wrong_device_here", got=device, expected=expected)


def test_describe_device_keys(ex1: LearnerModule, cpu: torch.device) -> None:
    info = ex1.describe_device(cpu)
    if not isinstance(info, dict):
        fail("ex1.describe_not_dict", got=type(info).__name__)
    missing, extra = KEYS - set(info), set(info) - KEYS
    if missing or extra:
        fail("ex1.describe_keys", missing=", ".join(sorted(missing)) or "-",
             extra=", ".join(sorted(map(str, extra))) or "-")
