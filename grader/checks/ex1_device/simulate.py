"""Make PyTorch report a chosen set of available devices, whichever API the learner asks."""

from __future__ import annotations

import pytest
import torch

from grader.checks.support.patching import Target, monkeypatch_everywhere


def availability(monkeypatch: pytest.MonkeyPatch, *, cuda: bool, mps: bool) -> torch.device:
    """Patch the availability APIs; return the device the contract expects then."""
    expected = torch.device("cuda" if cuda else "mps" if mps else "cpu")
    replacements: dict[Target, object] = {
        (torch.cuda, "is_available"): lambda: cuda,
        (torch.cuda, "device_count"): lambda: 1 if cuda else 0,
        (torch.backends.mps, "is_available"): lambda: mps,
        (torch.backends.mps, "is_built"): lambda: mps,
    }
    accel = getattr(torch, "accelerator", None)
    if accel is not None:
        current = None if expected.type == "cpu" else torch.device(expected.type)
        replacements.update({
            (accel, "is_available"): lambda: current is not None,
            (accel, "current_accelerator"): lambda *a, **k: current,
            (accel, "device_count"): lambda: 0 if current is None else 1,
        })
    monkeypatch_everywhere(monkeypatch, replacements)
    return expected
