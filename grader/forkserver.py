"""Start grading children fast: fork them from a process that has already imported torch.

A fresh ``python -m grader.child`` spends most of its start-up importing torch, pytest and
torch._dynamo (imported by the first optimizer a check builds): about 4.5 of the 7 s one
grading takes on the build machine (docs/instructors.md, "Speed"). A fork server pays that once per batch worker: it
imports them, then forks one child per request. The forked child becomes what sandbox.py
would have exec'd — its own session, the course's resource limits, the run's environment
and work dir, stdin and stdout on fds 0-2 and the signed channel on fd 3 — and runs
``grader.child.main()``.

Used inside ``fork_servers()``, which ``grader batch`` opens: a server costs what one child
costs (plus torch._dynamo, 1.6 s), so it pays from the second learner a worker grades, and a
single ``grader grade`` execs its child. Only on Linux (forking a process that loaded Apple's
frameworks is unsafe), and only because the server imports and does nothing else: it never
touches CUDA (it checks, and refuses to serve if an import did), so each child creates its own
context, as with multiprocessing's forkserver. With ``GRADER_FORKSERVER=0``, outside
``fork_servers()``, or when a server cannot start or dies, children are exec'd.

The run token: sandbox.py finds a run's processes by the token in /proc/<pid>/environ, which
shows the environment a process was *started* with — for a forked child, the server's. So
the server starts with a placeholder of the token's length and each child overwrites it in
place, in the memory /proc reads: the child, and whatever it forks without exec, then carry
the run's token as if exec'd with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

ENABLE_VAR = "GRADER_FORKSERVER"  # "0": always exec
CHANNEL_FD = 3  # where a forked child finds the signed channel
READY_TIMEOUT_S = 300.0
# Imported once by the server; the checks themselves are imported by pytest in each child.
PRELOAD = ("torch", "torch._dynamo", "numpy", "pytest", "_pytest.python", "pytest_timeout", "grader.child",
           "grader.checks.support.devices", "grader.checks.support.patching", "grader.checks.support.trusted")

_state = threading.local()
_servers: list[ForkServer] = []
_failed: set[int] = set()  # threads whose server could not start: they exec their children
_active = threading.Event()


class ServerGone(Exception):
    """The fork server could not start, or died: spawn by exec instead."""


class ForkedChild:
    """The part of ``subprocess.Popen`` that sandbox.py uses, for a child forked by a server."""

    def __init__(self, server: ForkServer, pid: int, stdin: int, stdout: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None
        self._server_alive = True
        self.stdin = os.fdopen(stdin, "wb")
        self.stdout = os.fdopen(stdout, "rb", buffering=0)

    def poll(self) -> int | None:
        if self.returncode is None and self._server_alive and select.select([self._server.sock], [], [], 0)[0]:
            self._read_exit()
        if self.returncode is None and not self._server_alive and not _running(self.pid):
            self.returncode = -signal.SIGKILL  # exit status unknown: what the grader does to it anyway
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0.0)
            if self._server_alive:
                select.select([self._server.sock], [], [], left)
            else:
                time.sleep(0.05 if left is None else min(0.05, left))
        assert self.returncode is not None
        return self.returncode

    def _read_exit(self) -> None:
        message = self._server.receive()
        if message is None:
            # The server died (a learner can kill its parent). The child, orphaned, goes on;
            # its end shows in /proc, and the sandbox kills what is left as usual.
            self._server_alive = False
        else:
            self.returncode = int(message["exit"])


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class ForkServer:
    def __init__(self, env: dict[str, str], token_length: int, token_var: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader.forkserver", str(theirs.fileno())],
            # NVML answers a stray is_available() without initialising CUDA, which a fork would break.
            env={**env, token_var: "0" * token_length, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"},
            cwd=tempfile.gettempdir(), pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C in the terminal is the grader's to handle
        )
        theirs.close()
        self.env = env
        if not select.select([self.sock], [], [], READY_TIMEOUT_S)[0] or self.receive() != {"ready": True}:
            self.close()
            raise ServerGone("the fork server did not start")

    def receive(self) -> dict[str, Any] | None:
        try:
            data = self.sock.recv(65536)
        except OSError:
            return None
        return json.loads(data) if data else None

    def spawn(self, cwd: str, env: dict[str, str], limits: dict[str, Any], channel_fd: int) -> ForkedChild:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        try:
            request = json.dumps({"cwd": cwd, "env": env, "limits": limits}).encode()
            socket.send_fds(self.sock, [request], [stdin_r, stdout_w, channel_fd])
            reply = self.receive() if select.select([self.sock], [], [], 30.0)[0] else None
        except OSError:
            reply = None
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        if reply is None or "pid" not in reply:
            os.close(stdin_w)
            os.close(stdout_r)
            self.close()
            raise ServerGone("the fork server died")
        return ForkedChild(self, int(reply["pid"]), stdin_w, stdout_r)

    def close(self) -> None:
        self.sock.close()  # the server ends at end-of-file
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def enabled() -> bool:
    return _active.is_set() and sys.platform == "linux" and os.environ.get(ENABLE_VAR, "1") != "0"


def server_for_this_thread(env: dict[str, str], token_length: int, token_var: str) -> ForkServer:
    """This thread's server (started on first use, restarted if it died); raises ServerGone
    when there is none. A server that could not start once is not tried again in this thread."""
    if threading.get_ident() in _failed:
        raise ServerGone("no fork server in this thread")
    server: ForkServer | None = getattr(_state, "server", None)
    if server is not None and server.process.poll() is None and server.env == env:
        return server
    if server is not None:
        server.close()
    _state.server = None
    try:
        server = ForkServer(env, token_length, token_var)
    except (ServerGone, OSError):
        _failed.add(threading.get_ident())
        raise ServerGone("the fork server did not start") from None
    _state.server = server
    _servers.append(server)
    return server


@contextlib.contextmanager
def fork_servers() -> Iterator[None]:
    """Within, each thread that grades gets a fork server; all are stopped on the way out."""
    _active.set()
    try:
        yield
    finally:
        _active.clear()
        _failed.clear()
        while _servers:
            with contextlib.suppress(OSError):
                _servers.pop().close()


# -- the server's side ---------------------------------------------------------------------------
def _write_token_in_place(name: str, value: str) -> None:
    """Overwrite ``name=<placeholder>`` in the environment block this process started with."""
    libc = ctypes.CDLL(None)
    environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
    prefix = f"{name}=".encode()
    i = 0
    while environ[i]:
        entry = ctypes.string_at(environ[i])
        if entry.startswith(prefix) and len(entry) == len(prefix) + len(value):
            ctypes.memmove(environ[i], prefix + value.encode(), len(entry))
            return
        i += 1


def _become_child(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    code = 1
    try:
        sock.close()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for target, fd in zip((0, 1, CHANNEL_FD), fds, strict=True):
            os.dup2(fd, target)
        os.dup2(1, 2)
        for fd in fds:
            if fd not in (0, 1, 2, CHANNEL_FD):
                os.close(fd)
        from grader.course import Limits
        from grader.sandbox import TOKEN_VAR, apply_limits

        apply_limits(Limits(**request["limits"]))
        env: dict[str, str] = request["env"]
        # The token first, in the block /proc shows (the server's placeholder kept os.environ's
        # original string there); then os.environ, which exec'd descendants inherit.
        _write_token_in_place(TOKEN_VAR, env[TOKEN_VAR])
        os.environ.clear()
        os.environ.update(env)
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]
        threads = env.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:  # libgomp read the variable when the server loaded it
            import torch

            torch.set_num_threads(int(threads))
        from grader import child

        code = child.main()
    except BaseException:  # noqa: BLE001 - whatever happens, this process must not return to the server loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        os._exit(code)


def serve(fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=fd)
    for name in PRELOAD:
        importlib.import_module(name)
    import torch

    if torch.cuda.is_initialized():  # an import touched CUDA: a forked child could not use it
        sock.send(json.dumps({"ready": False}).encode())
        return
    gc.freeze()  # children's collections skip the preloaded heap, and leave its pages shared
    sock.send(json.dumps({"ready": True}).encode())
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 3)
        except OSError:
            return
        if not data:
            return  # the grader closed its end
        pid = os.fork()
        if pid == 0:
            _become_child(sock, json.loads(data), fds)
        for received in fds:
            os.close(received)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]))
