"""Each concurrent grading's share of the machine: its threads, its part of the GPU's memory."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# Read by torch (and the BLAS under it) when a sandboxed child starts: its intra-op threads.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# How OpenMP's idle threads wait, read with them. A learner process spends a grading in Python between
# small ops (the stand-ins' bookkeeping, the protocol): with several threads, OpenMP's default spin-wait
# kept its workers busy all along — on 2 cores the second thread spun 0.60-0.75 CPU-s beside 0.7 s of the
# learner's own work. Passive waiting sleeps instead: `grader grade solutions` (a learner on every core)
# 4.4-4.6 -> 3.7-3.8 CPU-s, its wall 2.8-3.0 -> 2.8 s, three gradings each (--isolation none).
LEARNER_WAIT: Mapping[str, str] = MappingProxyType({"OMP_WAIT_POLICY": "PASSIVE"})


@dataclass(frozen=True)
class Share:
    """What each grading's processes get: the thread variables their libraries read, and the
    fraction of the GPU's memory the learner process may fill (grader/learner/sessions.py)."""

    env: Mapping[str, str] = field(default_factory=dict)
    gpu: float = 1.0


WHOLE = Share()


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):  # honours taskset, cpusets and Slurm's --cpus-per-task
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# What shows a GPU a learner process could use: NVIDIA's driver, AMD's ROCm.
GPU_NODES = ("/dev/nvidiactl", "/dev/kfd")


def lanes_here(device: str, learners_fork: bool) -> int:
    """How many runs one ``grader grade`` may have going at once (grader/run/lanes.py): two where two cores
    are free for it and no GPU is there to share — two learner processes on one GPU would share its
    memory, which the out-of-memory exercise fills, and its clock, which the timing exercise reads — and
    where processes are forked (Linux, and a sandbox that forks learner processes, ``learners_fork``:
    exec'd, the second run's judge and learner process would import torch again); one elsewhere."""
    if not (sys.platform.startswith("linux") and learners_fork) or usable_cores() < 2 or device not in ("auto", "cpu"):
        return 1
    if device == "auto" and any(os.path.exists(node) for node in GPU_NODES):
        return 1
    return 2


def learner_waits(environ: Mapping[str, str]) -> dict[str, str]:
    """How a learner process's idle OpenMP threads wait (``LEARNER_WAIT``), where ``environ`` says nothing."""
    return {var: value for var, value in LEARNER_WAIT.items() if var not in environ}


def machine_share(workers: int, environ: Mapping[str, str]) -> Share:
    """Each of ``workers`` concurrent gradings' share of the cores and of the GPU (a thread
    variable the user set in ``environ`` is left alone).

    Each process's torch starts one thread per core; two gradings on two cores then run four
    threads whose OpenMP spin-waits burn the CPU the other needs (measured on 2 cores: 2 workers
    gave 1.3x the throughput of 1; with one thread each, 2.1x, same scores). On a GPU, each may
    fill only its share of the memory (the out-of-memory exercise would otherwise take it all).
    """
    if workers <= 1:
        return WHOLE
    threads = str(max(1, usable_cores() // workers))
    return Share({var: threads for var in THREAD_VARS if var not in environ}, round(1 / workers, 4))
