"""A run's pids cgroup (root only): the kernel refuses the learner's forks and threads past the
course's limit, and every task in it is killed when the run ends (grader/run/sandbox.py).

``hierarchy()`` finds where runs can go (cgroup v1's pids controller, or v2 with pids enabled);
grader/run/isolation.py's probe records it. The learner process joins its run's cgroup itself,
through an fd it is handed (grader/spawn/confine.py ``join_cgroup``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

CGROUP_V1 = Path("/sys/fs/cgroup/pids")
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
                (root / CGROUP_PARENT).mkdir(exist_ok=True)
                if root == CGROUP_V2:
                    (root / "cgroup.subtree_control").write_text("+pids")
                    (root / CGROUP_PARENT / "cgroup.subtree_control").write_text("+pids")
                return str(root / CGROUP_PARENT)
            except OSError:
                continue
    return ""


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


class RunCgroup:
    """A pids cgroup for one run's learner processes: past ``max_tasks`` (threads count) the
    kernel refuses a fork; at the end every task in it is killed."""

    def __init__(self, hierarchy: str, max_tasks: int) -> None:
        self.path = Path(hierarchy) / f"run-{os.getpid()}-{secrets.token_hex(6)}"
        self.path.mkdir()
        (self.path / "pids.max").write_text(str(max_tasks))

    def procs_fd(self) -> int:
        """An fd of its ``cgroup.procs``: the learner process writes itself into it before it runs anything."""
        return os.open(self.path / "cgroup.procs", os.O_WRONLY)

    def limit_hits(self) -> int:
        """How many forks (or threads) the kernel refused so far."""
        for line in _read(self.path / "pids.events").splitlines():
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
        self.kill()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.02)
