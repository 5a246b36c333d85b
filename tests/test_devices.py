"""The real-accelerator recorder, exercised on this CPU machine with the CUDA API simulated,
and the patches both devices apply to the learner's names.

No GPU has run the grader yet; this at least proves the recorder's wrapping is sound (it once
recursed: recording a clock read read the clock) and that it sees what the timing checks read.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.checks.ex4_oom.budget import CHUNK_MB, CHUNKS_THAT_FIT, FILL_BUDGET, MiB
from grader.checks.support.devices import (
    CpuDevice,
    RealAccelerator,
    StandInDevice,
    holds_dtype,
    open_accelerator,
    open_device,
    runs_amp,
)
from grader.checks.support.learner import LearnerModule
from grader.checks.support.standin import StandIn
from grader.submission import Cell, SourceFile
from grader.toplevel import TopLevel, TopLevelLimits
from tests.conftest import SOLUTIONS

_REAL_PERF_COUNTER = time.perf_counter


def _solution(module: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(module, SOLUTIONS / f"{module}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Simulated GPU")
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


@contextlib.contextmanager
def learner_module(tmp_path: Path, name: str, text: str) -> Iterator[types.ModuleType]:
    """A learner module run by the sandbox's own top-level runner (one cell), removed afterwards."""
    source = SourceFile(name, text, f"{name}.py", (Cell("line 1", 1, text.count("\n") + 1),))
    toplevel = TopLevel({"ex": source}, str(tmp_path), TopLevelLimits(), lambda event, payload: None)
    try:
        yield LearnerModule(source, toplevel).load()
    finally:
        toplevel.close()


def test_patches_reach_names_the_learner_bound_at_import(tmp_path: Path) -> None:
    text = "from time import perf_counter\nfrom torch.cuda import synchronize\nimport time\nclock = time.monotonic\n"
    with learner_module(tmp_path, "bound_learner", text) as module:
        with StandIn(virtual_clock=True) as standin:
            assert module.perf_counter is time.perf_counter is not _REAL_PERF_COUNTER  # the virtual clock
            assert module.clock is time.monotonic  # a module-level alias too
            module.synchronize()  # the real one raises on a CPU build
            assert [e.kind for e in standin.events] == ["sync"]
            module.clock = print  # rebound by the learner meanwhile: left as the learner set it
        assert module.perf_counter is _REAL_PERF_COUNTER
        assert module.synchronize is torch.cuda.synchronize and module.clock is print


def test_amp_checks_never_demand_what_the_gpu_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # a T4
    assert not runs_amp("cuda", torch.bfloat16) and runs_amp("cuda", torch.float16)
    monkeypatch.setattr(torch.backends.mps, "is_macos_or_newer", lambda major, minor: (major, minor) <= (13, 6))
    assert not runs_amp("mps", torch.bfloat16)
    monkeypatch.setattr(torch, "__version__", "2.7.1")
    assert not runs_amp("mps", torch.float16)  # GradScaler on MPS needs torch 2.8
    monkeypatch.setattr(torch, "__version__", "2.10.0+cpu")
    assert runs_amp("mps", torch.float16)
    assert runs_amp("standin", torch.bfloat16) and runs_amp("standin", torch.float16)
    mps, cuda = StandInDevice("mps"), StandInDevice("cuda")
    assert not holds_dtype(mps, torch.float64) and holds_dtype(mps, torch.float16)  # ex3's dtype check
    assert holds_dtype(cuda, torch.float64) and holds_dtype(CpuDevice(), torch.float64)


def test_a_check_that_cannot_grade_fairly_on_the_gpu_gets_the_stand_in(fake_cuda: None) -> None:
    assert open_accelerator("auto").mode == "cuda"
    assert open_accelerator("auto", real_ok=lambda mode: mode != "cuda").mode == "standin"
    assert open_accelerator("cpu").mode == "standin"
    # Every kind a learner's function can be handed: the real one where there is one, else a stand-in.
    assert [open_device(kind, "auto").label for kind in ("cpu", "cuda", "mps")] == [
        "cpu", "cuda (Simulated GPU)", "mps (stand-in)"]
    assert open_device("cuda", "cpu").label == "cuda (stand-in)"


def test_stand_in_fill_capacity_is_the_budget_in_chunks() -> None:
    chunk = CHUNK_MB * MiB
    assert StandInDevice(budget_bytes=FILL_BUDGET).fill_capacity(chunk) == CHUNKS_THAT_FIT


EVENT_TIMING = """
import torch
from torch.cuda import Event

def time_matmul(n, device, repeats=5):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    start, end = Event(enable_timing=True), Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        a @ b
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000 / repeats
"""


def test_cuda_events_imported_by_name_time_the_stand_in(tmp_path: Path) -> None:
    with learner_module(tmp_path, "event_learner", EVENT_TIMING) as module:
        with StandIn(virtual_clock=True) as standin:
            seconds = module.time_matmul(512, standin.device)
            expected = standin.matmul_seconds(512)
        assert 0.95 < seconds / expected < 1.1  # launch overhead only
