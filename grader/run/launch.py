"""How the processes of a run start: exec'd, or forked from a warm server. Chosen by the caller.

A run needs two processes (grader/wire/messages.py): the judge (``python -m grader.judge``) and the
learner process (``python -m grader.learner``). ``ExecLauncher`` starts each as a fresh Python;
``ForkLauncher`` forks each from a server of its role that already imported torch, pytest and
the grader (grader/spawn/forkserver.py): a fresh Python spends most of its start-up importing them,
about 4.5 of the 7 s one grading takes, so a batch pays that once per worker. Both give the child
the same things: its own session, the course's resource limits (the learner process), its
environment and work dir, stdin and stdout on fds 0-2 and the fds it is passed from 3 on.

The launcher is an object the caller owns and passes to ``grade()`` — ``grader batch`` opens a
ForkLauncher for its lifetime, ``grader grade`` a RestartLauncher (exec'd, then forked for the
runs after the first) — as CPython's
multiprocessing passes a context, never a module-global switch. A ForkLauncher whose server
cannot start (or dies) execs instead, with the same results. Forks happen only on Linux (forking
a process that loaded Apple's frameworks is unsafe).
"""

from __future__ import annotations

import compileall
import concurrent.futures
import contextlib
import dataclasses
import functools
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Protocol

from grader.paths import PACKAGE_DIR
from grader.run import isolation as iso
from grader.run.isolation import Isolation
from grader.run.reaper import run_tree, wait_exited
from grader.run.share import WHOLE, Share, lanes_here
from grader.spawn.confine import FIRST_FD, TOKEN_VAR, apply_limits, join_cgroup
from grader.wire.codec import ProtocolError, decode, encode
from grader.wire.messages import (
    ForkExited,
    ForkRequest,
    ForkStarted,
    Limits,
    RequestedDevice,
    Role,
    ServerMessage,
    ServerReady,
)

READY_TIMEOUT_S = 300.0
# The pid of a child that ended before the grader found it: above any pid the kernel gives (2**22), so
# that no process has it, nothing is under it, and a signal sent to it reaches no one (never -1 or 0).
GONE = 2**31 - 1
TOKEN_LENGTH = 32


@dataclass(frozen=True)
class Spawn:
    """One process to start."""

    role: Role
    env: Mapping[str, str]
    cwd: str
    fds: tuple[int, ...]  # handed to the child, which finds them at FIRST_FD, FIRST_FD + 1, ...
    limits: Limits | None = None  # the learner process's; the judge runs without
    device: RequestedDevice = "auto"  # the learner process's --device
    cgroup_fds: tuple[int, ...] = ()  # the learner process writes itself into its run's cgroups through them
    gpu_share: float = 1.0  # the learner process's part of the GPU's memory (a batch's workers split it)


class Child(Protocol):
    """The part of ``subprocess.Popen`` that grader/run/sandbox.py uses."""

    pid: int
    stdin: IO[bytes]
    stdout: IO[bytes]
    fds: tuple[int, ...]  # where the child finds the fds it was passed
    host_pid: bool  # whether ``pid`` is a pid of the grader's namespace (a forked isolated one is not)

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...


class Launcher(Protocol):
    isolation: Isolation  # how the learner processes it starts are isolated

    def prepare(self, spawn: Spawn) -> None:
        """Get ready, without waiting, to start a process like ``spawn`` soon (a fork server's
        imports, beside the start of another role's process)."""

    def start(self, spawn: Spawn) -> Child: ...


def argv(spawn: Spawn, fds: tuple[int, ...]) -> list[str]:
    """The command line of a process of this role, which finds its passed fds at ``fds``."""
    if spawn.role == "judge":
        return [sys.executable, "-m", "grader.judge"]
    return [sys.executable, "-m", "grader.learner", str(fds[0]), spawn.device, repr(spawn.gpu_share)]


def _exec_child(limits: Limits | None, cgroup_fds: tuple[int, ...], judge: bool) -> None:
    """In the exec'd child, before exec: its session, its limits, its run's cgroups."""
    apply_limits(limits, judge=judge)
    join_cgroup(cgroup_fds)


class Exec:
    """A Popen, and where the child finds its passed fds (their own numbers). A learner process is
    exec'd inside its sandbox when the launcher isolates (grader/run/isolation.py)."""

    host_pid = True

    def __init__(self, spawn: Spawn, isolation: Isolation = iso.NONE) -> None:
        command = argv(spawn, spawn.fds)
        env = dict(spawn.env)
        isolated = spawn.role == "learner" and isolation.mode == "bwrap"
        work_mb = spawn.limits.file_size_mb if spawn.limits else 256
        started = (iso.sandboxed(isolation, command, env, work_mb) if isolated  # in its own work dir
                   else contextlib.nullcontext((command, ())))
        with started as (command, sandbox_fds):
            self.popen = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                cwd=tempfile.gettempdir() if isolated else spawn.cwd, env=env, pass_fds=(*spawn.fds, *sandbox_fds),
                preexec_fn=functools.partial(_exec_child, spawn.limits, spawn.cgroup_fds,  # noqa: PLW1509 - before exec
                                             spawn.role == "judge"),
            )
        self.pid = self.popen.pid
        self.stdin: IO[bytes] = self.popen.stdin  # type: ignore[assignment]
        self.stdout: IO[bytes] = self.popen.stdout  # type: ignore[assignment]
        self.fds = spawn.fds
        self._status = iso.exit_status if isolated else _same

    @property
    def returncode(self) -> int | None:
        return self._status(self.popen.returncode)

    def poll(self) -> int | None:
        return self._status(self.popen.poll())

    def wait(self, timeout: float | None = None) -> int:
        return self._status(wait_exited(self.popen, timeout))  # type: ignore[return-value]


def _same(code: int | None) -> int | None:
    return code


def _shared(spawn: Spawn, share: Share) -> Spawn:
    """``spawn`` with its grading's share of the machine: the thread variables (where ``spawn`` sets
    none: the judge's one thread, grader/run/sandbox.py), the GPU's part."""
    return dataclasses.replace(spawn, env={**share.env, **spawn.env}, gpu_share=share.gpu)


class ExecLauncher:
    """Each process a fresh Python, with ``share`` (a batch's worker's part of the machine)."""

    def __init__(self, share: Share = WHOLE, isolation: Isolation = iso.NONE) -> None:
        self.share = share
        self.isolation = isolation

    def prepare(self, spawn: Spawn) -> None:
        pass  # a fresh Python starts when it is asked for

    def start(self, spawn: Spawn) -> Child:
        return Exec(_shared(spawn, self.share), self.isolation)


class ServerGone(Exception):
    """The fork server could not start, or died: exec instead."""


class ForkedChild:
    """A child forked by a server, as the sandbox sees a Popen. ``pid`` is the server's name for it;
    ``host`` its pid in the grader's namespace where the grader finds its processes by their tree
    (an ordinary user's isolated server: no cgroup holds them), else None."""

    def __init__(self, server: ForkServer, pid: int, stdin: int, stdout: int, host: int | None = None) -> None:
        self._server = server
        self._key = pid  # how the server names it in ForkExited
        # A root server's isolated children are found by their cgroup; their pids are of its namespace.
        self.host_pid = not server.isolated or server.by_tree
        # Found by its tree: one not found had already ended, and its pid namespace with it (GONE: no tree).
        self.pid = (host if host is not None else GONE) if server.by_tree else pid
        self.returncode: int | None = None
        self.stdin: IO[bytes] = os.fdopen(stdin, "wb")
        self.stdout: IO[bytes] = os.fdopen(stdout, "rb", buffering=0)
        self.fds: tuple[int, ...] = ()

    def poll(self) -> int | None:
        return self._settle(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._settle(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"forked child {self._key}", timeout or 0.0)
        return code

    def _settle(self, timeout: float | None) -> int | None:
        """The exit status, once known within ``timeout`` (None: however long it takes)."""
        if self.returncode is not None:
            return self.returncode
        code = self._server.exit_of(self._key, timeout)
        if code is not None:
            self.returncode = iso.exit_status(code) if self._server.isolated else code
        elif self._server.gone:
            # The server died. The child, orphaned, goes on; its end shows in /proc, and the
            # sandbox kills what is left as usual.
            deadline = None if timeout is None else time.monotonic() + timeout
            while self.host_pid and _running(self.pid):
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                time.sleep(0.05)
            self.returncode = -signal.SIGKILL  # exit status unknown: what the grader does to it anyway
        return self.returncode


def _host_pid(server: int, pid: int) -> int | None:
    """The grader's pid for the process an isolated server (under bubblewrap's process ``server``)
    knows as ``pid``: the one of the server's descendants one pid namespace down (status's NSpid:
    the grader's pid, then the server's; a learner's processes are a namespace deeper still)."""
    for found in run_tree(server):
        try:
            with open(f"/proc/{found}/status", encoding="ascii", errors="replace") as status:
                levels = next((line.split()[1:] for line in status if line.startswith("NSpid:")), [])
        except OSError:
            continue
        if len(levels) == 2 and levels[1] == str(pid):
            return found
    return None


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class ForkServer:
    """The grader's end of one server (``python -m grader.spawn.forkserver ROLE FD``), which forks
    the children of many runs at once: a thread reads what it says (``ForkStarted``, each
    ``ForkExited`` by pid) for whichever run waits. An isolated learner server runs inside a
    bubblewrap sandbox of its own (grader/run/isolation.py)."""

    def __init__(self, role: Role, env: Mapping[str, str], isolation: Isolation = iso.NONE,
                 work_mb: int = 256) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.role = role
        self.isolated = role == "learner" and isolation.forks
        # An ordinary user's: no cgroup holds its children's processes, so the grader finds them by
        # their process tree, from their pids in its own namespace (grader/run/reaper.py).
        self.by_tree = self.isolated and not isolation.as_root
        self.gone = False  # the server died, or said what is not one of its messages
        self._changed = threading.Condition()
        self._started: list[int] = []  # the pid of the one request in flight, once forked
        self._exits: dict[int, int] = {}
        self._requesting = threading.Lock()  # one request at a time: its reply is the next ForkStarted
        server_env = dict(env)
        if role == "learner" and isolation.mode == "none" and not isolation.cgroups:
            # The run token is written into each child's environment block in place (grader/spawn/forkserver.py);
            # only a run without a sandbox has one (grader/run/sandbox.py).
            server_env[TOKEN_VAR] = "0" * TOKEN_LENGTH
        # NVML answers a stray is_available() without initialising CUDA, which a fork would break.
        server_env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        command = [sys.executable, "-m", "grader.spawn.forkserver", role, str(theirs.fileno())]
        started = (iso.sandboxed(isolation, [*command, "isolated", str(work_mb)], server_env, work_mb, server=True)
                   if self.isolated else contextlib.nullcontext((command, ())))
        with theirs, started as (command, sandbox_fds):
            self.process = subprocess.Popen(
                command, env=server_env, cwd=tempfile.gettempdir(), pass_fds=(theirs.fileno(), *sandbox_fds),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C in the terminal is the grader's to handle
            )
        self._ready: bool | None = None  # once it said so (``ready``)
        self._readying = threading.Lock()

    def ready(self) -> bool:
        """Whether the server started, waiting for it to say so the first time (its imports take
        seconds: a server of another role starts meanwhile); False: it could not, and is closed."""
        with self._readying:
            if self._ready is None:
                self._ready = bool(select.select([self.sock], [], [], READY_TIMEOUT_S)[0]) \
                    and self.receive() == ServerReady(ok=True)
                if self._ready:
                    threading.Thread(target=self._read, name=f"{self.role} fork server", daemon=True).start()
                else:
                    self.close()
            return self._ready

    def receive(self) -> ServerMessage | None:
        """The server's next message; None when it is gone (or said what is not one: as good as gone)."""
        try:
            data = self.sock.recv(65536)
        except OSError:
            return None
        if not data:
            return None
        try:
            message: ServerMessage = decode(data, ServerMessage)
        except ProtocolError:
            return None
        return message

    def _read(self) -> None:
        """The reader thread: each message to whoever waits for it, until the server is gone."""
        while True:
            message = self.receive()
            with self._changed:
                if isinstance(message, ForkStarted):
                    self._started.append(message.pid)
                    self._exits.pop(message.pid, None)  # a pid reused: an end left unread was another child's
                elif isinstance(message, ForkExited):
                    self._exits[message.pid] = message.code
                else:
                    self.gone = True
                self._changed.notify_all()
            if self.gone:
                return

    def exit_of(self, pid: int, timeout: float | None) -> int | None:
        """Child ``pid``'s exit code once the server said it ended (within ``timeout``); None if not yet
        or the server is gone."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self.gone, timeout)
            return self._exits.pop(pid, None)

    def alive(self) -> bool:
        return not self.gone and self.process.poll() is None

    def start(self, spawn: Spawn) -> ForkedChild:
        """Fork a child for ``spawn`` (while the children of other runs go on)."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        pid: int | None = None
        try:
            env = iso.learner_env(spawn.env) if self.isolated else dict(spawn.env)
            request = encode(ForkRequest(env, spawn.cwd, spawn.device, spawn.limits, len(spawn.cgroup_fds),
                                         spawn.gpu_share))
            with self._requesting:
                socket.send_fds(self.sock, [request], [stdin_r, stdout_w, *spawn.fds, *spawn.cgroup_fds])
                with self._changed:
                    if self._changed.wait_for(lambda: bool(self._started) or self.gone, READY_TIMEOUT_S) \
                            and self._started:
                        pid = self._started.pop()
        except OSError:
            pid = None
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        if pid is None:
            os.close(stdin_w)
            os.close(stdout_r)
            self.close()
            raise ServerGone(f"the {self.role} fork server died")
        child = ForkedChild(self, pid, stdin_w, stdout_r, _host_pid(self.process.pid, pid) if self.by_tree else None)
        child.fds = tuple(range(FIRST_FD, FIRST_FD + len(spawn.fds)))
        return child

    def hang_up(self) -> None:
        """Tell the server to end, without waiting for it (``close`` waits)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # the server ends at end-of-file; the reader thread too

    def close(self) -> None:
        self.hang_up()
        self.sock.close()
        try:
            wait_exited(self.process, 10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ForkLauncher:
    """One server of each role (and environment) for all the launcher's starts, forking the children
    of as many runs at once as the caller runs (a batch's workers): a batch of N workers pays one
    server's start a role, not N, and a program that runs batch after batch (the test suite)
    reuses them. All are stopped when the launcher closes. A role whose server could not start is
    not tried again: its processes are exec'd; a server that died is replaced at the next start."""

    def __init__(self, share: Share = WHOLE, isolation: Isolation = iso.NONE) -> None:
        self.share = share
        self.isolation = isolation
        self._servers: dict[tuple[Role, tuple[tuple[str, str], ...], int], ForkServer] = {}
        self._failed: set[Role] = set()
        self._lock = threading.Lock()
        self.usable = sys.platform == "linux"
        # The servers start in a thread of the launcher's own, which lives as long as the launcher: an
        # isolated server's bubblewrap runs with --die-with-parent, and the kernel's parent-death signal
        # follows the *thread* that started a process. Started by a batch's worker thread, it died with
        # that thread at the end of each batch, and a program that runs batch after batch (the test suite)
        # paid an isolated learner server's start, torch's imports, for every batch.
        self._starter: concurrent.futures.ThreadPoolExecutor | None = None

    def __enter__(self) -> ForkLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _server(self, spawn: Spawn) -> ForkServer | None:
        """The server for ``spawn`` (already shared), started now if there is none (not waited for)."""
        role = spawn.role
        if role in self._failed or not self.usable:
            return None
        if role == "learner" and not self.isolation.learners_fork:
            return None  # isolated, but this machine cannot fork isolated processes: each is exec'd
        env = {k: v for k, v in spawn.env.items() if k != TOKEN_VAR}
        work_mb = spawn.limits.file_size_mb if spawn.limits else 256
        # The work dir's size shapes an isolated learner server's sandbox only: a judge's server, never
        # isolated, serves a course of any file size (one server less where two courses' sizes differ).
        key = (role, tuple(sorted(env.items())), work_mb if role == "learner" else 0)
        with self._lock:
            server = self._servers.get(key)
            if server is not None and server.alive():
                return server
            if server is not None:
                del self._servers[key]
                server.close()
            if self._starter is None:
                self._starter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fork server starter")
            try:
                server = self._starter.submit(ForkServer, role, env, self.isolation, work_mb).result()
            except (ServerGone, OSError):
                self._failed.add(role)
                return None
            self._servers[key] = server
            return server

    def _acquire(self, spawn: Spawn) -> ForkServer | None:
        server = self._server(spawn)
        if server is None or server.ready():  # the other workers wait for the same server, not start their own
            return server
        with self._lock:
            self._failed.add(spawn.role)
            self._servers = {key: s for key, s in self._servers.items() if s is not server}
        return None

    def prepare(self, spawn: Spawn) -> None:
        self._server(_shared(spawn, self.share))

    def start(self, spawn: Spawn) -> Child:
        spawn = _shared(spawn, self.share)
        server = self._acquire(spawn)
        if server is not None:
            try:
                return server.start(spawn)
            except ServerGone:
                pass
        return Exec(spawn, self.isolation)

    def server_pids(self) -> list[tuple[Role, int]]:
        """Each running server's role and pid (benchmarks/profile_grade.py reads what its children cost)."""
        with self._lock:
            return [(server.role, server.process.pid) for server in self._servers.values() if server.alive()]

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
            starter, self._starter = self._starter, None
        for server in servers:  # every server told first: they end side by side, each on its core (20-40 ms)
            server.hang_up()
        for server in servers:
            with contextlib.suppress(OSError):
                server.close()
        if starter is not None:
            starter.shutdown(wait=False)


class RestartLauncher:
    """One grading's processes (``grader grade``, a self-check, Gradescope's ``autograde``): each
    role's first process exec'd, a fresh Python as ``ExecLauncher`` starts it; its later ones —
    the runs after one that crashed, ran out of time or broke the protocol (grader/run/sandbox.py)
    — forked from a server of that role started at the first restart (``ForkLauncher``). A grading
    done in one run starts no server; one that needs seven pays one Python start more per role,
    not six. Close it (``grading_launcher``) to stop the servers."""

    def __init__(self, share: Share = WHOLE, isolation: Isolation = iso.NONE) -> None:
        self.share = share
        self.isolation = isolation
        self._first = ExecLauncher(share, isolation)
        self._restarts = ForkLauncher(share, isolation)
        self._started: set[Role] = set()

    def prepare(self, spawn: Spawn) -> None:
        if spawn.role in self._started:
            self._restarts.prepare(spawn)

    def start(self, spawn: Spawn) -> Child:
        if spawn.role in self._started:
            return self._restarts.start(spawn)
        self._started.add(spawn.role)
        return self._first.start(spawn)

    def close(self) -> None:
        self._restarts.close()


def compile_ahead() -> None:
    """Write the grader's bytecode where it is missing or stale, before the processes that import it
    start: they never write it themselves (grader/run/sandbox.py ``base_env``; the learner's sandbox is
    read-only), so in an editable install (the README's) every exec'd judge compiled its modules and the
    ~40 checks again — 0.2 s of the judge's start, on `grader grade`'s critical path, at every grading.
    3 ms when nothing is stale. Nothing is written where the grader's own process may not write
    bytecode (``PYTHONDONTWRITEBYTECODE``), and a package it cannot write to (a read-only install, whose
    every file would be compiled again at each command only to fail to be written) is left as it is:
    the processes then compile in memory, as before."""
    if writes_bytecode():
        compile_package()


def compile_package() -> None:
    """The grader's bytecode, written where missing or stale, whatever this process's Python may write (as pip
    compiles a package at an install): ``compile_ahead`` where it may, the test suite once a run."""
    compileall.compile_dir(PACKAGE_DIR, quiet=2)


def writes_bytecode() -> bool:
    """Whether this process writes the grader's bytecode ahead (``compile_ahead``): its Python may write bytecode,
    and the package's cache can be written (``grader doctor`` says which of the two it is not)."""
    cache = PACKAGE_DIR / "__pycache__"
    return not sys.dont_write_bytecode and os.access(cache if cache.is_dir() else PACKAGE_DIR, os.W_OK)


@contextlib.contextmanager
def grading_launcher(isolation: Isolation, lanes: int = 1) -> Iterator[Launcher]:
    """What one grading starts its processes with, for its lifetime, the whole machine: ``RestartLauncher``
    for one run at a time; for ``lanes`` at once (grader/run/lanes.py), a ``ForkLauncher`` whose two servers
    start as a first run's processes would (their imports beside each other) and fork every run's,
    the lanes' first ones included — exec'd, each lane's would import torch again, on the same cores."""
    compile_ahead()
    launcher = ForkLauncher(WHOLE, isolation) if lanes > 1 else RestartLauncher(WHOLE, isolation)
    try:
        yield launcher
    finally:
        launcher.close()


@contextlib.contextmanager
def launcher_for_batch(fork: bool, share: Share, isolation: Isolation) -> Iterator[Launcher]:
    """What ``grader batch`` grades with, for its lifetime: processes forked from warm servers
    (unless ``fork`` is False), each with ``share`` of the machine."""
    compile_ahead()
    if not fork:
        yield ExecLauncher(share, isolation)
        return
    with ForkLauncher(share, isolation) as launcher:
        yield launcher


class Launchers(Protocol):
    """How the commands start their processes: ``grading`` for one ``grader grade`` (its lifetime; ``lanes``:
    the runs it may have going at once, as ``lanes`` says for this machine), ``batch`` for a ``grader batch``
    (its lifetime; ``fork`` False: ``--no-fork-server``)."""

    def lanes(self, device: RequestedDevice, isolation: Isolation) -> int: ...
    def grading(self, isolation: Isolation, lanes: int) -> contextlib.AbstractContextManager[Launcher]: ...
    def batch(self, fork: bool, share: Share, isolation: Isolation) -> contextlib.AbstractContextManager[Launcher]: ...


class FreshLaunchers:
    """The command line's: each command starts its own processes and servers, and stops them when
    it is done. A program that runs many commands in one process (the test suite) passes its own
    ``Launchers`` to ``grader.commands.cli.main``, sharing warm servers between them."""

    def lanes(self, device: RequestedDevice, isolation: Isolation) -> int:
        return lanes_here(device, isolation.learners_fork)

    def grading(self, isolation: Isolation, lanes: int) -> contextlib.AbstractContextManager[Launcher]:
        return grading_launcher(isolation, lanes)

    def batch(self, fork: bool, share: Share, isolation: Isolation) -> contextlib.AbstractContextManager[Launcher]:
        return launcher_for_batch(fork, share, isolation)


FRESH = FreshLaunchers()
