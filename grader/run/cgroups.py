"""A run's cgroups (root only): the kernel refuses the learner's forks and threads past the
course's limit, stops it past its memory, and every task in them is killed when the run ends
(grader/run/sandbox.py).

``hierarchy()`` finds where runs can go for pids (cgroup v1's pids controller, or v2 with pids
enabled) and ``memory_hierarchy()`` for memory (v1's memory controller, or v2's); grader/run/
isolation.py's probe records both. The learner process joins its run's cgroups itself, through the
fds it is handed (grader/spawn/confine.py ``join_cgroup``).

Why memory needs a cgroup: ``RLIMIT_DATA`` (grader/spawn/confine.py) counts private memory only, so
1.5 GiB held through ``memfd_create`` passed a 1 GiB limit. A memory cgroup counts every page the
run's processes touch — anonymous, shared (memfd, /dev/shm, its tmpfs work dir) — and past
``limits.memory_mb`` the kernel's out-of-memory killer stops the process; ``oom_kills`` tells the
sandbox that is what happened, and the report says the memory limit, not a crash.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup/pids")
MEMORY_V1 = Path("/sys/fs/cgroup/memory")
CGROUP_V2 = Path("/sys/fs/cgroup")
CGROUP_PARENT = "grader"


def hierarchy() -> str:
    """The pids cgroup hierarchy the grader can make runs in (root), or ""."""
    if os.geteuid() != 0:
        return ""
    for root in (CGROUP_V1, CGROUP_V2):
        if (root / "cgroup.procs").exists() and ((root / "pids.max").exists() or root == CGROUP_V1
                                                 or "pids" in _read(root / "cgroup.controllers")):
            try:
                if root == CGROUP_V2:
                    return _enable_v2("pids")
                (root / CGROUP_PARENT).mkdir(exist_ok=True)
                return str(root / CGROUP_PARENT)
            except OSError:
                continue
    return ""


def memory_hierarchy() -> str:
    """The memory cgroup hierarchy the grader can make runs in (root), or ""."""
    if os.geteuid() != 0:
        return ""
    try:
        if (MEMORY_V1 / "memory.limit_in_bytes").exists():
            (MEMORY_V1 / CGROUP_PARENT).mkdir(exist_ok=True)
            return str(MEMORY_V1 / CGROUP_PARENT)
        if "memory" in _read(CGROUP_V2 / "cgroup.controllers").split():
            return _enable_v2("memory")
    except OSError:
        pass
    return ""


def _enable_v2(controller: str) -> str:
    """The grader's parent cgroup on cgroup v2, with ``controller`` enabled for its children (written
    into the root's and the parent's ``cgroup.subtree_control``); raises OSError where it cannot."""
    (CGROUP_V2 / CGROUP_PARENT).mkdir(exist_ok=True)
    (CGROUP_V2 / "cgroup.subtree_control").write_text(f"+{controller}")
    (CGROUP_V2 / CGROUP_PARENT / "cgroup.subtree_control").write_text(f"+{controller}")
    return str(CGROUP_V2 / CGROUP_PARENT)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class RunCgroup:
    """A pids cgroup for one run's learner processes: past ``max_tasks`` (threads count) the
    kernel refuses a fork; at the end every task in it is killed. With a ``memory`` hierarchy, a
    memory cgroup too (the same one on cgroup v2): past ``memory_bytes`` of all its memory the
    kernel stops the process that asks for more."""

    def __init__(self, hierarchy: str, max_tasks: int, memory: str = "", memory_bytes: int = 0) -> None:
        name = f"run-{os.getpid()}-{secrets.token_hex(6)}"
        self.path = Path(hierarchy) / name
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_tasks))
        try:  # pids.events, held open for ``limit_hits`` (-1: it cannot be)
            self._events = os.open(self.path / "pids.events", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._events = -1
        self.memory: Path | None = None
        if memory:
            self.memory = Path(memory) / name
            self.memory.mkdir(exist_ok=True)  # on cgroup v2, the same folder as the pids one
            try:
                if (self.memory / "memory.max").exists():  # v2; no swap: what is held stays counted
                    (self.memory / "memory.max").write_text(str(memory_bytes))
                    with contextlib.suppress(OSError):
                        (self.memory / "memory.swap.max").write_text("0")
                else:
                    (self.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
                    with contextlib.suppress(OSError):  # swap accounting, where the kernel has it
                        (self.memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            except OSError:
                self.remove()
                raise

    def procs_fds(self) -> tuple[int, ...]:
        """An fd of each of its ``cgroup.procs``: the learner process writes itself into them
        before it runs anything."""
        paths = [self.path] + ([self.memory] if self.memory is not None and self.memory != self.path else [])
        return tuple(os.open(path / "cgroup.procs", os.O_WRONLY) for path in paths)

    def events_fds(self) -> tuple[int, ...]:
        """An fd of its ``pids.events``, read-only (none where it cannot be opened): the judge counts the
        refused forks through it as each check begins and ends (grader/judge/plugin.py ``refused``)."""
        with contextlib.suppress(OSError):
            return (os.open(self.path / "pids.events", os.O_RDONLY | os.O_CLOEXEC),)
        return ()

    def oom_kills(self) -> int:
        """How many of its processes the kernel stopped for holding more than its memory."""
        if self.memory is None:
            return 0
        events = _read(self.memory / "memory.events") or _read(self.memory / "memory.oom_control")
        for line in events.splitlines():
            name, _, count = line.partition(" ")
            if name == "oom_kill" and count.strip().isdigit():
                return int(count)
        return 0

    def limit_hits(self) -> int:
        """How many forks (or threads) the kernel refused so far. Read ~40 times a grading (as each check
        begins and ends, and while the grader waits): through an fd held open and read from its start,
        1 us where opening the file each time took 30-100 us (a third of them with the machine busy)."""
        try:
            events = os.pread(self._events, 4096, 0).decode() if self._events >= 0 else ""
        except OSError:
            events = ""
        for line in events.splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and count.strip().isdigit():
                return int(count)
        return 0

    def tasks(self) -> list[int]:
        return [int(pid) for pid in _read(self.path / "cgroup.procs").split()]

    def kill(self) -> None:
        """Every process in it, until none is left (a fork racing the kill is caught by the next round)."""
        kill_file = self.path / "cgroup.kill"
        for _ in range(100):
            tasks = self.tasks()
            if not tasks:
                return
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
            for pid in tasks:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, 9)
            time.sleep(0.02)

    def remove(self) -> None:
        if self._events >= 0:
            os.close(self._events)
        self._events = -1
        self.kill()
        for path in {self.path, self.memory} - {None}:
            for _ in range(50):
                try:
                    path.rmdir()  # type: ignore[union-attr]
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy: a process that joined it after the kill (a forked one joins by itself)
                    time.sleep(0.02)
                    self.kill()
