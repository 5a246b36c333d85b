"""Every process of a run, found and ended: by the run token in its environment (/proc).

The learner process and everything it starts carry the run's token (grader/spawn/confine.py
``TOKEN_VAR``), also what left its session; at the end of a run the grader kills all of them
(``kill_everything``), and while it runs counts their threads where there is no cgroup to
refuse them (``token_tasks``). Where the run has a pids cgroup (grader/run/cgroups.py), the
kernel does both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from grader.spawn.confine import TOKEN_VAR


def token_tasks(token: str) -> int:
    """How many processes and threads carry this run's token (threads count, as in a pids cgroup)."""
    count = 0
    for pid in token_processes(token):
        try:
            count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return count


def token_processes(token: str) -> list[int]:
    """Every process whose environment carries this run's token."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as env:
                if needle in env.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_everything(pid: int, token: str) -> None:
    """The learner process's session, then any process that escaped it but still carries the token."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for _ in range(20):
        leftovers = [p for p in token_processes(token) if p != os.getpid()]
        if not leftovers:
            return
        for leftover in leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(leftover, signal.SIGKILL)
        time.sleep(0.05)
