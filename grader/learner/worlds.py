"""A world where PyTorch reports a chosen set of available devices — and answers consistently.

Whatever the learner asks (``torch.cuda.is_available()``, ``torch.accelerator``,
``torch.cuda.current_device()``, ``torch.backends.mps.is_available()``), and however it holds the
names (``from torch.cuda import is_available``, an lru_cache'd helper), it hears of the same
machine: with CUDA, the CUDA stand-in's API; with only an Apple GPU, the MPS stand-in's (and
``torch.cuda`` as a Mac has it); with neither, a CPU build's — and with ``mps_built``, a Mac whose
PyTorch has MPS built in but cannot use it (``is_built()`` True, ``is_available()`` False).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from grader.emulation.patching import LearnerCode, Target, patched
from grader.emulation.standin import StandIn, cpu_build_cuda_patches
from grader.learner.calls import clear_learner_caches


def replacements(*, cuda: bool, mps: bool, mps_built: bool = False, cuda_count: int = 1) -> dict[Target, object]:
    found: dict[Target, object]
    if cuda:
        found = StandIn("cuda").api_patches()
        found[(torch.cuda, "device_count")] = lambda: cuda_count
        found[(torch.backends.mps, "is_available")] = lambda: mps
        found[(torch.backends.mps, "is_built")] = lambda: mps or mps_built
    elif mps:
        found = StandIn("mps").api_patches()
        found.update(cpu_build_cuda_patches())
    else:
        found = cpu_build_cuda_patches()
        found[(torch.backends.mps, "is_available")] = lambda: False
        found[(torch.backends.mps, "is_built")] = lambda: mps_built
        accel = getattr(torch, "accelerator", None)
        if accel is not None:
            found.update({(accel, "is_available"): lambda: False,
                          (accel, "current_accelerator"): lambda *a, **k: None,
                          (accel, "device_count"): lambda: 0})
    return found


@contextlib.contextmanager
def world(code: LearnerCode, *, cuda: bool, mps: bool, mps_built: bool = False,
          cuda_count: int = 1) -> Iterator[None]:
    """For the duration, this machine looks like one with these devices."""
    clear_learner_caches(code)  # an lru_cache'd availability check asks this machine, not the last one
    try:
        with patched(replacements(cuda=cuda, mps=mps, mps_built=mps_built, cuda_count=cuda_count), code):
            yield
    finally:
        clear_learner_caches(code)
