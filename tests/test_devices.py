"""The learner process's device sessions: the real-accelerator recorder, exercised on this CPU
machine with the CUDA API simulated, the patches every session applies to the learner's names,
and the judge's choice of a real device or a stand-in (from the learner process's Hello).

No GPU has run the grader yet; this at least proves the recorder's wrapping is sound (it once
recursed: recording a clock read read the clock) and that it sees what the timing checks read.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.checks.ex4_oom.budget import fill_budget
from grader.emulation.patching import NO_LEARNER_CODE, LearnerCode
from grader.emulation.standin import StandIn
from grader.judge.devices import runs_amp
from grader.learner.sessions import RealSession, StandInSession, open_session
from grader.learner.toplevel import TopLevel, TopLevelLimits
from grader.reference.draws import Draw
from grader.wire.messages import Cell, CudaFacts, Hello, MiB, OpenDevice, Source
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
    acc = RealSession("cuda")
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
def learner_module(tmp_path: Path, name: str, text: str) -> Iterator[tuple[types.ModuleType, LearnerCode]]:
    """A learner module run by the sandbox's own top-level runner (one cell), and where the
    learner's code lives (as the runner hands it to a session); removed afterwards."""
    source = Source(name, text, f"{name}.py", (Cell("line 1", 1, text.count("\n") + 1),))
    toplevel = TopLevel({"ex": source}, str(tmp_path), TopLevelLimits(), lambda event: None)
    try:
        yield toplevel.module(name), LearnerCode(tuple(sorted(toplevel.learner_dirs())))
    finally:
        toplevel.close()


def test_patches_reach_names_the_learner_bound_at_import(tmp_path: Path) -> None:
    text = "from time import perf_counter\nfrom torch.cuda import synchronize\nimport time\nclock = time.monotonic\n"
    with learner_module(tmp_path, "bound_learner", text) as (module, code):
        with StandIn(virtual_clock=True, code=code) as standin:
            assert module.perf_counter is time.perf_counter is not _REAL_PERF_COUNTER  # the virtual clock
            assert module.clock is time.monotonic  # a module-level alias too
            module.synchronize()  # the real one raises on a CPU build
            assert [e.kind for e in standin.events] == ["sync"]
            module.clock = print  # rebound by the learner meanwhile: left as the learner set it
        assert module.perf_counter is _REAL_PERF_COUNTER
        assert module.synchronize is torch.cuda.synchronize and module.clock is print


def test_the_learner_modules_are_found_again_after_imports_and_replacements(tmp_path: Path) -> None:
    """LearnerCode.namespaces() rescans sys.modules only when a module came or went: a learner module
    imported after a scan is found, one removed is not, one replaced under its name is seen as it is now."""
    with learner_module(tmp_path, "scanned_learner", "x = 1\n") as (module, code):
        assert [ns["__name__"] for ns in code.namespaces()] == ["scanned_learner"]
        (tmp_path / "scanned_helper.py").write_text("y = 2\n", encoding="utf-8")
        sys.path.insert(0, str(tmp_path))  # as the learner process has its work dir
        try:
            helper = importlib.import_module("scanned_helper")
            assert {ns["__name__"] for ns in code.namespaces()} == {"scanned_learner", "scanned_helper"}
            replacement = types.ModuleType("scanned_helper")
            replacement.__file__ = helper.__file__
            sys.modules["scanned_helper"] = replacement  # same name, same count: found as it is now
            assert any(ns is vars(replacement) for ns in code.namespaces())
            del sys.modules["scanned_helper"]
            assert [ns["__name__"] for ns in code.namespaces()] == ["scanned_learner"]
        finally:
            sys.modules.pop("scanned_helper", None)
            sys.path.remove(str(tmp_path))
        assert vars(module) in code.namespaces()


def test_amp_checks_never_demand_what_the_gpu_lacks() -> None:
    t4 = Hello("2.13.0", CudaFacts("Tesla T4", (7, 5), 15 * 2**30, 1), mps=False, cuda_bf16=False)
    assert not runs_amp(t4, "cuda", torch.bfloat16) and runs_amp(t4, "cuda", torch.float16)
    old_mac = Hello("2.7.1", None, mps=True, mps_bf16=False, mps_grad_scaler=False)
    assert not runs_amp(old_mac, "mps", torch.bfloat16)
    assert not runs_amp(old_mac, "mps", torch.float16)  # GradScaler on MPS needs torch 2.8
    assert runs_amp(Hello("2.10.0", None, mps=True, mps_bf16=True, mps_grad_scaler=True), "mps", torch.float16)
    assert runs_amp(t4, "standin", torch.bfloat16) and runs_amp(t4, "standin", torch.float16)


def test_the_learner_process_opens_the_session_the_judge_chose(fake_cuda: None) -> None:
    assert isinstance(open_session(OpenDevice("cuda", standin=False), NO_LEARNER_CODE), RealSession)
    assert open_session(OpenDevice("cuda", standin=False), NO_LEARNER_CODE).label == "cuda (Simulated GPU)"
    assert isinstance(open_session(OpenDevice("mps", standin=True), NO_LEARNER_CODE), StandInSession)
    assert open_session(OpenDevice("cpu", standin=False), NO_LEARNER_CODE).label == "cpu"


def test_a_real_device_the_machine_lacks_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no real mps"):
        open_session(OpenDevice("mps", standin=False), NO_LEARNER_CODE)


def test_stand_in_fill_capacity_is_the_budget_in_chunks() -> None:
    """What the stand-in says fits is what the judge computes from the budget it drew (grader/judge/devices.py
    fill_capacity: budget // chunk), for every draw."""
    for seed in range(30):
        draw = Draw(seed)
        budget = fill_budget(draw)
        assert StandInSession(budget_bytes=budget).fill_capacity(draw.chunk_mb * MiB) == draw.chunks_that_fit
        assert budget // (draw.chunk_mb * MiB) == draw.chunks_that_fit


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
    with learner_module(tmp_path, "event_learner", EVENT_TIMING) as (module, code):
        with StandIn(virtual_clock=True, code=code) as standin:
            seconds = module.time_matmul(512, standin.device)
            expected = standin.matmul_seconds(512)
        assert 0.95 < seconds / expected < 1.1  # launch overhead only
