"""The real-accelerator recorder, exercised on this CPU machine with the CUDA API simulated.

No GPU has run the grader yet; this at least proves the recorder's wrapping is sound (it once
recursed: recording a clock read read the clock) and that it sees what the timing checks read.
"""

from __future__ import annotations

import importlib.util
import time

import pytest
import torch

from grader.checks.support.devices import RealAccelerator
from tests.conftest import SOLUTIONS


def _solution(module: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(module, SOLUTIONS / f"{module}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 0)
    if hasattr(torch, "accelerator"):
        monkeypatch.setattr(torch.accelerator, "synchronize", lambda *a: None)


def test_recorder_sees_sync_clock_and_matmuls(fake_cuda: None) -> None:
    ex2 = _solution("ex2_timing")
    acc = RealAccelerator("cuda")
    original = time.perf_counter
    with acc:
        # The solution synchronizes only for cuda/mps devices: call its helper directly.
        ex2._synchronize(torch.device("cuda"))
        ex2.time_matmul(32, torch.device("cpu"), repeats=2)
    kinds = [e.kind for e in acc.events]
    assert kinds.count("matmul") == 3  # warm-up + 2 timed
    assert "clock" in kinds and "sync" in kinds
    assert time.perf_counter is original  # every patch undone
