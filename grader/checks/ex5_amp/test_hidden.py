"""Exercise 5, hidden checks: autocast really applied, GradScaler with float16, the modern
torch.amp API, data moved to the device, and the memory AMP saves (measured by the grader)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from grader.checks.ex5_amp.workload import make_problem, train, watch_amp
from grader.checks.support.devices import Accelerator, runs_amp
from grader.checks.support.learner import LearnerModule
from grader.checks.support.meter import MemoryMeter
from grader.checks.support.outcomes import fail

STEPS = 2
# Peak live bytes under AMP / FP32, one step of a 4096x64-256-256-10 MLP with Adam, measured
# here with the reference solution: about 0.55 (bf16 and fp16). A loop that never applies
# autocast measures 1.0; 0.85 leaves room for a learner's extra live tensors.
AMP_PEAK_RATIO = 0.85


def _amp(dtype: torch.dtype) -> Callable[[str], bool]:
    """Grade on the real device only where it runs AMP in ``dtype`` (bfloat16: not on a T4)."""
    return lambda mode: runs_amp(mode, dtype)


def _reduced_matmuls(acc: Accelerator, dtype: torch.dtype) -> int:
    return sum(1 for e in acc.events if e.kind == "matmul" and e.dtype == str(dtype))


def test_bf16_uses_autocast(ex5: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    model, inputs, targets = make_problem(64, 8, 32, 3)
    with accel(real_ok=_amp(torch.bfloat16)) as acc:
        train(ex5, model, inputs, targets, acc.device, STEPS, torch.bfloat16)
        if _reduced_matmuls(acc, torch.bfloat16) == 0:
            fail("ex5.no_autocast", dtype="bfloat16")


def test_fp16_uses_grad_scaler(ex5: LearnerModule, accel: Callable[..., Accelerator],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    model, inputs, targets = make_problem(64, 8, 32, 3)
    with watch_amp(monkeypatch) as calls, accel(real_ok=_amp(torch.float16)) as acc:
        train(ex5, model, inputs, targets, acc.device, STEPS, torch.float16)
        if _reduced_matmuls(acc, torch.float16) == 0:
            fail("ex5.no_autocast", dtype="float16")
    if min(calls.scale, calls.step, calls.update) < STEPS:
        fail("ex5.fp16_no_scaler", scale=calls.scale, step=calls.step, update=calls.update, steps=STEPS)


def test_modern_amp_api(ex5: LearnerModule, accel: Callable[..., Accelerator],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    model, inputs, targets = make_problem(64, 8, 32, 3)
    with watch_amp(monkeypatch) as calls, accel(real_ok=_amp(torch.float16)) as acc:
        train(ex5, model, inputs, targets, acc.device, 1, torch.float16)
    if calls.deprecated:
        fail("ex5.deprecated_amp", api=", ".join(sorted(set(calls.deprecated))))


def test_moves_model_and_data(ex5: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    model, inputs, targets = make_problem(64, 8, 32, 3)
    with accel() as acc:
        train(ex5, model, inputs, targets, acc.device, 1, None)
        where = next(model.parameters()).device.type
    if where != acc.device.type:
        fail("ex5.model_not_moved", got=where, expected=acc.device.type)


def _peak(ex5: LearnerModule, acc: Accelerator, dtype: torch.dtype | None) -> int:
    model, inputs, targets = make_problem(4096, 64, 256)
    meter = MemoryMeter()
    with meter:
        train(ex5, model, inputs, targets, acc.device, 1, dtype)
    return meter.peak


def test_amp_saves_memory(ex5: LearnerModule, accel: Callable[..., Accelerator]) -> None:
    with accel(real_ok=_amp(torch.bfloat16)) as acc:
        fp32 = _peak(ex5, acc, None)
        amp = _peak(ex5, acc, torch.bfloat16)
    if amp > AMP_PEAK_RATIO * fp32:
        fail("ex5.amp_no_memory_saving", amp=f"{amp / 2**20:.1f}", fp32=f"{fp32 / 2**20:.1f}",
             ratio=f"{amp / fp32:.2f}")
