"""Exercise 1, hidden checks: the cuda → mps → cpu order, and describe_device's values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from grader.checks.ex1_device.simulate import availability
from grader.checks.support.devices import Accelerator
from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import fail
from grader.checks.support.patching import monkeypatch_everywhere


def _pick(ex1: LearnerModule, monkeypatch: pytest.MonkeyPatch, *, cuda: bool, mps: bool) -> torch.device:
    expected = availability(monkeypatch, cuda=cuda, mps=mps)
    device = ex1.pick_device()
    if not isinstance(device, torch.device):
        fail("ex1.not_a_device", got=type(device).__name__, value=repr(device)[:60])
    if device.index not in (None, 0) or device.type != expected.type:
        situation = f"cuda={cuda}, mps={mps}"
        if expected.type == "cpu" and device.type == "cuda":
            fail("ex1.hardcoded_cuda", situation=situation)
        if expected.type == "mps":
            fail("ex1.ignores_mps", situation=situation, got=device)
        fail("ex1.wrong_order", situation=situation, got=device, expected=expected)
    return device


def test_pick_device_prefers_cuda(ex1: LearnerModule, monkeypatch: pytest.MonkeyPatch) -> None:
    _pick(ex1, monkeypatch, cuda=True, mps=True)


def test_pick_device_uses_mps(ex1: LearnerModule, monkeypatch: pytest.MonkeyPatch) -> None:
    _pick(ex1, monkeypatch, cuda=False, mps=True)


def test_pick_device_falls_back_to_cpu(ex1: LearnerModule, monkeypatch: pytest.MonkeyPatch) -> None:
    _pick(ex1, monkeypatch, cuda=False, mps=False)


def _expect(info: Any, key: str, ok: bool, expected: object) -> None:
    if not ok:
        fail("ex1.describe_field", key=key, got=repr(info.get(key))[:60], expected=expected)


def _check_common(info: Any, device: torch.device) -> None:
    if not isinstance(info, dict):
        fail("ex1.describe_not_dict", got=type(info).__name__)
    _expect(info, "type", info.get("type") == device.type, repr(device.type))
    name = info.get("name")
    _expect(info, "name", isinstance(name, str) and bool(name.strip()), "a non-empty str")


def test_describe_device_cpu(ex1: LearnerModule, cpu: torch.device, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two GPUs present: a CPU's count is still 1, whatever torch.cuda.device_count() says.
    monkeypatch_everywhere(monkeypatch, {(torch.cuda, "device_count"): lambda: 2})
    info = ex1.describe_device(cpu)
    _check_common(info, cpu)
    _expect(info, "count", info.get("count") == 1 and type(info.get("count")) is int, "1 (int)")
    _expect(info, "capability", info.get("capability") is None, "None")
    _expect(info, "total_memory_bytes", info.get("total_memory_bytes") is None, "None")


def test_describe_device_cuda(ex1: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    # On an Apple GPU the cuda fields are still checked, on the stand-in.
    with accel(real_ok=lambda mode: mode == "cuda") as acc:
        info = ex1.describe_device(acc.device)
        expected_name = torch.cuda.get_device_name(acc.device)
        expected_cap = tuple(torch.cuda.get_device_capability(acc.device))
        expected_total = int(torch.cuda.get_device_properties(acc.device).total_memory)
        expected_count = torch.cuda.device_count()
    _check_common(info, acc.device)
    _expect(info, "name", info.get("name") == expected_name, repr(expected_name))
    cap = info.get("capability")
    _expect(info, "capability",
            isinstance(cap, tuple) and len(cap) == 2 and all(type(v) is int for v in cap) and cap == expected_cap,
            f"{expected_cap!r} (tuple of two ints)")
    total = info.get("total_memory_bytes")
    _expect(info, "total_memory_bytes", type(total) is int and total == expected_total, f"{expected_total} (int)")
    _expect(info, "count", type(info.get("count")) is int and info.get("count") == expected_count, str(expected_count))
