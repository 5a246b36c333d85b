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

from grader.emulation.patching import LearnerCode
from grader.emulation.runtime import machine
from grader.learner.calls import clear_learner_caches


@contextlib.contextmanager
def world(code: LearnerCode, *, cuda: bool, mps: bool, mps_built: bool = False,
          cuda_count: int = 1) -> Iterator[None]:
    """For the duration, this machine looks like one with these devices (grader/emulation/runtime.py)."""
    clear_learner_caches(code)  # an lru_cache'd availability check asks this machine, not the last one
    try:
        with machine(code, cuda=cuda, mps=mps, mps_built=mps_built, cuda_count=cuda_count):
            yield
    finally:
        clear_learner_caches(code)
