"""A world where PyTorch reports a chosen set of available devices — and answers consistently.

Whatever the learner asks (``torch.cuda.is_available()``, ``torch.accelerator``,
``torch.cuda.current_device()``, ``torch.backends.mps.is_available()``), and however it bound the
names (``from torch.cuda import is_available``), it hears of the same machine: with CUDA, the CUDA
stand-in's API; with only an Apple GPU, the MPS stand-in's (and ``torch.cuda`` as a Mac has it);
with neither, a CPU build's.
"""

from __future__ import annotations

import pytest
import torch

from grader.checks.support.learner import clear_learner_caches
from grader.checks.support.patching import Target, monkeypatch_everywhere
from grader.checks.support.standin import StandIn, cpu_build_cuda_patches


def availability(monkeypatch: pytest.MonkeyPatch, *, cuda: bool, mps: bool, mps_built: bool = False) -> torch.device:
    """Make this machine look like one with these devices; return the device the contract expects.

    ``mps_built``: PyTorch has MPS built in but cannot use it (a Mac in a VM, macOS < 12.3), so
    ``torch.backends.mps.is_built()`` says True while ``is_available()`` says False.
    """
    clear_learner_caches()  # an lru_cache'd availability check asks this machine, not the last one
    replacements: dict[Target, object]
    if cuda:
        replacements = StandIn("cuda").api_patches()
        replacements[(torch.backends.mps, "is_available")] = lambda: mps
        replacements[(torch.backends.mps, "is_built")] = lambda: mps
    elif mps:
        replacements = StandIn("mps").api_patches()
        replacements.update(cpu_build_cuda_patches())
    else:
        replacements = cpu_build_cuda_patches()
        replacements[(torch.backends.mps, "is_available")] = lambda: False
        replacements[(torch.backends.mps, "is_built")] = lambda: mps_built
        accel = getattr(torch, "accelerator", None)
        if accel is not None:
            replacements.update({(accel, "is_available"): lambda: False,
                                 (accel, "current_accelerator"): lambda *a, **k: None,
                                 (accel, "device_count"): lambda: 0})
    monkeypatch_everywhere(monkeypatch, replacements)
    return torch.device("cuda" if cuda else "mps" if mps else "cpu")
