"""Every process of a run, found and ended where no cgroup holds them (/proc).

Where the run has a pids cgroup (grader/run/cgroups.py) the kernel counts and ends its processes.
Elsewhere the grader does, in one of two ways:

* a sandboxed run (bubblewrap, its own pid namespace) is a tree: the sandbox's init adopts whatever
  is orphaned inside, and nothing leaves a pid namespace, so every process of the run descends from
  the process the grader started (``run_tree``). The learner's environment carries no mark
  (issue 22, item 5): the tree is read from each process's parent in /proc, which any user may read.
* an unsandboxed run (``isolation: none``) has no namespace to hold what leaves its session: the
  learner process and everything it starts carry the run's token (grader/spawn/confine.py
  ``TOKEN_VAR``), by which the grader finds them (``token_processes``) — the mark a run with no
  sandbox cannot avoid, which its report already says is not isolated.

At the end of a run the grader kills all of them (``kill_tree``, ``kill_everything``); while it
runs it counts their threads against the course's process limit (``tree_tasks``, ``token_tasks``).
A process the grader started itself is waited for the moment it ends (``wait_exited``).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable

from grader.spawn.confine import TOKEN_VAR


def _tasks(pids: list[int]) -> int:
    """Processes and threads of ``pids`` (threads count, as in a pids cgroup)."""
    count = 0
    for pid in pids:
        try:
            count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return count


def wait_exited(process: subprocess.Popen[bytes], timeout: float | None) -> int:
    """``process.wait(timeout)``, woken by the kernel the moment the process ends (a pidfd, Linux 5.3; None: as
    long as it takes, as ``Popen.wait()``, which blocks in the kernel too).
    ``Popen.wait`` with a timeout polls, sleeping 0.5, 1, 2 ... up to 50 ms between looks: a process that ends
    32 ms after it is told is seen ended at 63.5 ms, and ``grader grade`` waited 31-180 ms for its two servers
    at its end (docs/performance.md, twenty-first session). Raises ``subprocess.TimeoutExpired`` as
    ``Popen.wait`` does; where no pidfd can be opened or polled, it is ``Popen.wait``."""
    if process.returncode is not None:
        return process.returncode
    if timeout is None:
        return process.wait()
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux, an older kernel, or a seccomp filter that refuses it
        return process.wait(timeout)
    try:
        ended = bool(select.select([pidfd], [], [], timeout)[0])
    except OSError:  # a kernel (or gVisor) that opens a pidfd but cannot poll one
        return process.wait(timeout)
    finally:
        os.close(pidfd)
    if not ended:
        raise subprocess.TimeoutExpired(process.args, timeout)
    return process.wait()  # ended: reaped at once


# -- a sandboxed run: the tree under the process the grader started ------------------------------------
def _parent(pid: str) -> int | None:
    """The parent of a live process (None for a zombie: it ran its last, and what it left was adopted)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            line = stat.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    fields = line[line.rfind(b")") + 2:].split()
    if len(fields) < 2 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1])


def run_tree(root: int) -> list[int]:
    """``root`` and every process descending from it (empty when ``root`` is gone)."""
    children: dict[int, list[int]] = {}
    alive = False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        parent = _parent(entry.name)
        if parent is None:
            continue
        alive = alive or int(entry.name) == root
        children.setdefault(parent, []).append(int(entry.name))
    if not alive:
        return []
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_tasks(root: int) -> int:
    """How many processes and threads the run under ``root`` has."""
    return _tasks(run_tree(root))


def kill_tree(root: int) -> None:
    """Every process under ``root``, its sandbox's init among them (with which the kernel ends the
    rest of its pid namespace), until none is left."""
    _kill_until_gone(lambda: run_tree(root))


# -- an unsandboxed run: the processes carrying its token ------------------------------------------------
def token_tasks(token: str) -> int:
    """How many processes and threads carry this run's token."""
    return _tasks(token_processes(token))


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
    _kill_until_gone(lambda: token_processes(token))


def _kill_until_gone(find: Callable[[], list[int]]) -> None:
    for _ in range(20):
        leftovers = [p for p in find() if p != os.getpid()]
        if not leftovers:
            return
        for leftover in leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(leftover, signal.SIGKILL)
        time.sleep(0.05)
