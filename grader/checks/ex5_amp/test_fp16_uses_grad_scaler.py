"""ex5.fp16_uses_grad_scaler: with float16 the matmuls run in float16 and a GradScaler scales,
steps and updates — the lesson's headline AMP mistake is float16 without it (public). On every
device: a GradScaler works on the CPU and on MPS too (torch.amp.GradScaler(device.type))."""

from __future__ import annotations

from collections.abc import Callable

import torch

from grader.checks.ex5_amp.workload import AMP_STEPS, Earlier, really_reduced, small, train
from grader.judge.api import Device, Hello, LearnerModule, fail, runs_amp
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại: FP16 cần GradScaler, BF16 thì không.",
    "en": "Reread: FP16 needs GradScaler, BF16 does not.",
}
MESSAGES = {
    "ex5.scaler_disabled": {
        "vi": "GradScaler được gọi nhưng đã tự tắt ({disabled} lần gọi không làm gì): GradScaler(\"cuda\") tự tắt "
              "trên device khác — tạo nó bằng torch.amp.GradScaler(device.type).",
        "en": "The GradScaler was called but had turned itself off ({disabled} calls did nothing): "
              "GradScaler(\"cuda\") disables itself on any other device — build it with "
              "torch.amp.GradScaler(device.type).",
    },
    "ex5.fp16_no_scaler": {
        "vi": "float16 mà không có GradScaler (scale {scale}, step {step}, update {update} lần cho {steps} bước): "
              "dùng scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update().",
        "en": "float16 without GradScaler (scale {scale}, step {step}, update {update} calls for {steps} steps): use "
              "scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update().",
    },
}


def test_fp16_uses_grad_scaler(ex5: LearnerModule, devices: Callable[..., list[Device]], hello: Hello,
                               draw: Draw, earlier: Earlier) -> None:
    for dev in devices("cpu", "cuda", "mps", real_ok=lambda mode: runs_amp(hello, mode, torch.float16)):
        with dev, dev.instruments(watch_amp=True) as calls:
            trained = train(ex5, dev, dev.build("ex5.problem", *small(draw)), AMP_STEPS, torch.float16,
                            lr=draw.ex5_lr, autocast=True)
        earlier.deprecated[dev.label] = tuple(calls.deprecated)
        if really_reduced(dev, torch.float16, trained, small(draw), draw.ex5_lr) == 0:
            fail("ex5.no_autocast", device=dev.label, dtype="float16")
        if min(calls.scale, calls.step, calls.update) < AMP_STEPS and calls.disabled:
            fail("ex5.scaler_disabled", device=dev.label, disabled=calls.disabled)
        if min(calls.scale, calls.step, calls.update) < AMP_STEPS:
            fail("ex5.fp16_no_scaler", device=dev.label, scale=calls.scale, step=calls.step, update=calls.update,
                 steps=AMP_STEPS)
