"""A fork server: imports what one role needs once, then forks a child per request.

``python -m grader.spawn.forkserver ROLE FD`` (started by grader/run/launch.py ``ForkServer``). The server
imports and does nothing else: it never touches CUDA (it checks, and refuses to serve if an
import did), so each child creates its own CUDA context, as with multiprocessing's forkserver.
A forked child becomes what grader/run/launch.py would have exec'd — its own session, the course's
resource limits (learner processes), the run's environment and work dir, stdin and stdout on
fds 0-2 and the fds it was passed from 3 on — and runs the role's ``main()``.

The run token (a run without a sandbox only: grader/run/reaper.py): grader/run/sandbox.py finds
such a run's learner processes by the token in
/proc/<pid>/environ, which shows the environment a process was *started* with — for a forked
child, the server's. So the learner server starts with a placeholder of the token's length and
each child overwrites it in place, in the memory /proc reads: the child, and whatever it forks
without exec, then carry the run's token as if exec'd with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import importlib.util
import os
import select
import signal
import socket
import sys
import traceback

from grader.spawn.confine import FIRST_FD, TOKEN_VAR, apply_limits, drop_privileges, enter_run, isolates, join_cgroup
from grader.wire.codec import decode, encode, prepare
from grader.wire.messages import ForkExited, ForkRequest, ForkStarted, Role, ServerReady, role_of

# Imported once by a server; the judge's server imports the checks too (grader/judge/session.py
# ``import_checks``).
PRELOAD = {
    "judge": ("torch", "numpy", "pytest", "_pytest.python", "pytest_timeout",
              "grader.judge.__main__", "grader.judge.session", "grader.judge.api"),
    "learner": ("torch", "numpy", "grader.learner.__main__", "grader.learner.deferred", "grader.learner.kernel",
                "grader.learner.runner", "grader.learner.sessions"),
}
# Imported too where installed: the real IPython, which many notebooks' code imports (``from IPython.display
# import ...``; the learner process's kernel patches it then, grader/learner/kernel.py ``when_imported``):
# 0.13 s a child when the server has not. And the modules torch imports only at their first use, on paths
# every grading takes (each child imported them again, and each import made the learner process scan
# sys.modules again for the learner's modules, grader/emulation/patching.py ``namespaces``; found with
# an audit hook on imports in a batch of the reference solutions, 2026-12-06): ``_disable_current_modes``
# (the grader's, both sides) imports schema_check_mode, ``torch.get_default_device`` (the stand-in's
# surface) torch.utils._device, ``record_function`` (every optimizer's step and zero_grad) _cupti_monitor.
# Where installed: they are torch's internals, which another release may move.
TORCH_LAZY = ("torch._subclasses.schema_check_mode",)
PRELOAD_IF_INSTALLED = {
    "judge": TORCH_LAZY,
    "learner": ("IPython", *TORCH_LAZY, "torch.utils._device", "torch.profiler._cupti_monitor"),
}


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


def _isolate(work_mb: int, cgroup_fds: tuple[int, ...]) -> None:
    """Inside the server's sandbox: the run's cgroup (this process and the init it forks too), then
    a pid, mount, IPC and network namespace of its own (grader/run/isolation.py); nobody's uid comes
    after the limits."""
    join_cgroup(cgroup_fds)
    enter_run(work_mb)


def _become_child(role: Role, sock: socket.socket, request: ForkRequest, fds: list[int],  # noqa: PLR0917
                  isolated: bool, work_mb: int, wakeup: tuple[int, int], collected: object) -> None:
    code = 1
    try:
        sock.close()
        signal.set_wakeup_fd(-1)  # the server's, which a learner process must neither keep nor write
        for fd in wakeup:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        count = request.cgroups  # the run's cgroups' fds come last
        cgroup_fds = tuple(fds[len(fds) - count:])
        del fds[len(fds) - count:]
        if isolated:
            _isolate(work_mb, cgroup_fds)
        else:
            join_cgroup(cgroup_fds)
        targets = (0, 1, *range(FIRST_FD, FIRST_FD + len(fds) - 2))
        moved = [os.dup(fd) for fd in fds]  # out of the way first: a target may be another's source
        for fd in fds:
            os.close(fd)
        for target, fd in zip(targets, moved, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.dup2(1, 2)
        apply_limits(request.limits, judge=role == "judge")
        if isolated:
            drop_privileges()
        env = dict(request.env)
        if role == "learner" and TOKEN_VAR in env:
            # The token first, in the block /proc shows; then os.environ, which exec'd descendants inherit.
            _write_token_in_place(TOKEN_VAR, env[TOKEN_VAR])
        os.environ.clear()
        os.environ.update(env)
        os.chdir(request.cwd)
        threads = env.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:  # libgomp read the variable when the server loaded it
            import torch

            torch.set_num_threads(int(threads))
        if role == "judge":
            from grader.judge.__main__ import main as judge_main

            code = judge_main(collected)
        else:
            from grader.learner.__main__ import main

            code = main(FIRST_FD, request.device, request.gpu_share)
    except BaseException:  # noqa: BLE001 - whatever happens, this process must not return to the server loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        os._exit(code)


def _imported_forkable(names: tuple[str, ...], if_installed: tuple[str, ...] = (), *, checks: bool = False,
                       learner: bool = False) -> bool:
    """Import ``names`` and those of ``if_installed`` that are installed into this server (and, for
    the judge's, ``checks``: every check module; for the learner's, ``learner``: what each of its processes
    would otherwise do first, grader/learner/sessions.py ``before_forks``); False when an import touched
    CUDA (a forked child could not use it: the caller then stops, and the grader execs instead)."""
    for name in names:
        importlib.import_module(name)
    for name in if_installed:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    if checks:
        from grader.judge.ahead import compute_ahead
        from grader.judge.session import import_checks

        with contextlib.suppress(Exception):  # a check that does not import fails in each child, as pytest says
            compute_ahead(import_checks())  # what every grading computes alike (ex4's budget), once
    if learner:
        from grader.learner.sessions import before_forks

        before_forks()
    prepare()  # the messages' codec, compiled once for every child
    import torch

    if torch.cuda.is_initialized():
        return False
    gc.freeze()  # children's collections skip the preloaded heap, and leave its pages shared
    gc.enable()  # (off through the imports: ``serve``)
    return True


def serve(role: Role, fd: int, isolated: bool = False, work_mb: int = 256) -> None:
    """Import PRELOAD[role], then fork a child for each request, as many at once as are asked for
    (a batch's workers share one server of each role): ``ForkStarted`` once forked, ``ForkExited``
    with its pid once it ended. Neither server imports ``torch._dynamo``: a learner process defers it
    until its code compiles (grader/learner/deferred.py), the judge's reference training never needs it
    (grader/reference/problems.py, tests/test_reference.py). The judge's server forks from inside a
    pytest session that collected every check (grader/judge/session.py ``serve_collected``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.disable()  # through the imports, as in an exec'd learner process (grader/learner/__main__.py)
    sock = socket.socket(fileno=fd)
    if not _imported_forkable(PRELOAD[role], PRELOAD_IF_INSTALLED[role], checks=role == "judge",
                              learner=role == "learner") or (
            isolated and not isolates(work_mb)):
        sock.send(encode(ServerReady(ok=False)))
        return

    def forks(collected: object) -> None:  # the judge's collected checks, opaque here (grader/judge/session.py)
        _fork_on_request(role, sock, isolated, work_mb, collected)

    if role == "judge":
        from grader.judge.session import serve_collected

        serve_collected(forks)
    else:
        forks(None)


def _fork_on_request(role: Role, sock: socket.socket, isolated: bool, work_mb: int, collected: object) -> None:
    """The server's loop, until the grader closes its end: a child for each request, its exit reported."""
    # A child's end wakes the loop through a pipe (no thread: a server that forks must have one only).
    wakeup = os.pipe()
    for end in wakeup:
        os.set_blocking(end, False)
    signal.set_wakeup_fd(wakeup[1], warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.send(encode(ServerReady(ok=True)))
    children: set[int] = set()
    while True:
        ready = select.select([sock.fileno(), wakeup[0]], [], [])[0]
        if wakeup[0] in ready:
            with contextlib.suppress(OSError):
                while os.read(wakeup[0], 512):
                    pass
            _report_exits(sock, children)
        if sock.fileno() not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
        except OSError:
            data = b""
        if not data:  # the grader closed its end (and waits for this process to end): nothing to tidy — the
            os._exit(0)  # children are on their own, and a torch-laden interpreter's teardown took 0.2 s a server
        request = decode(data, ForkRequest)
        pid = os.fork()
        if pid == 0:
            _become_child(role, sock, request, fds, isolated, work_mb, wakeup, collected)
        children.add(pid)
        for received in fds:
            os.close(received)
        sock.send(encode(ForkStarted(pid)))


def _report_exits(sock: socket.socket, children: set[int]) -> None:
    """``ForkExited`` for each child that has ended, reaped."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            children.discard(pid)
            with contextlib.suppress(OSError):
                sock.send(encode(ForkExited(pid, os.waitstatus_to_exitcode(status))))


if __name__ == "__main__":
    isolated = len(sys.argv) > 3 and sys.argv[3] == "isolated"
    serve(role_of(sys.argv[1]), int(sys.argv[2]), isolated, int(sys.argv[4]) if isolated else 256)
