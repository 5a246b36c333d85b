"""What a child process does to itself before its role's main runs: the start-up that happens
in each child, exec'd (grader/run/launch.py) or forked from a server (grader/spawn/forkserver.py).

Its own session and the course's resource limits; inside a forked, isolated learner process a
fresh pid, mount, IPC and network namespace with a new work dir and pseudo-terminals of its own
(``enter_run``), its run's cgroup (``join_cgroup``) and no capability, as nobody (``drop_privileges``).
Runs in the learner process and in the fork servers, so it imports nothing of the grader but the
wire (grader/layout.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal

from grader.wire.messages import Limits, MiB

FIRST_FD = 3  # where a child finds the fds it was passed, in order
TOKEN_VAR = "GRADER_RUN_TOKEN"  # every learner process of a run carries it (grader/run/reaper.py)
NOBODY = 65534
HOME = "/learner"  # the learner's work dir inside the sandbox: a tmpfs, the only writable place but SHM
SHM = "/dev/shm"  # the learner process's POSIX shared memory: a tmpfs of its own, as large as HOME


def apply_limits(limits: Limits | None, *, judge: bool = False) -> None:
    """In the child, before anything of the learner's: its own session and the course's limits.
    The judge (``judge``) runs no learner code but rebuilds what the learner process sends: its
    private memory is bounded too (``limits.judge_memory_mb``), behind the frame budget
    (grader/wire/framing.py) — a 60-byte frame once grew it to 1.4 GiB."""
    os.setsid()
    if limits is None:
        return
    settings = ((resource.RLIMIT_DATA, limits.judge_memory_mb * MiB), (resource.RLIMIT_CORE, 0)) if judge else (
        # Data, not address space: a CUDA context reserves tens of GiB of address space it
        # never touches, which RLIMIT_AS would refuse; private memory is what a grab uses.
        (resource.RLIMIT_DATA, limits.memory_mb * MiB),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * MiB),
        (resource.RLIMIT_CORE, 0),
    )
    for which, value in settings:
        # The hard CPU limit a little above the soft one: at the soft limit the kernel sends
        # SIGXCPU, which the report can name; at the hard one only an anonymous SIGKILL.
        hard = value + 5 if which == resource.RLIMIT_CPU else value
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, hard))
    # A write past the file-size limit then fails with EFBIG in the learner's code (a
    # result with a message) instead of killing the process with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


# -- in a forked learner process, inside the server's sandbox (grader/spawn/forkserver.py) --------------
_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWIPC, _CLONE_NEWNET = 0x00020000, 0x20000000, 0x08000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_PR_SET_NO_NEW_PRIVS, _PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT = 38, 1, 24, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _exit_like(status: int) -> None:
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def enter_run(work_mb: int) -> None:
    """Go on in a fresh pid, mount, IPC and network namespace, with a new /proc and a new empty tmpfs
    work dir, as its second process: its first, an init that stays root (not signalable by the learner
    process), waits for it and ends with it — and with the init the kernel ends the rest. The
    process that called this waits too, and exits as the init did (128 + a signal)."""
    libc = _libc()
    # IPC and network too: a server's sandbox has one of each, which its children would otherwise
    # share — a System V segment a learner process made outlives it, and the next learner forked
    # from the same server attached to it (tests/test_isolation.py).
    _check(libc.unshare(_CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWNET), "unshare")
    init = os.fork()
    if init:
        _exit_like(os.waitpid(init, 0)[1])
    _check(libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    _check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None), "mount /proc")
    options = f"size={work_mb * MiB},mode=0777".encode()
    _check(libc.mount(b"tmpfs", HOME.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options), f"mount {HOME}")
    os.mkdir(f"{HOME}/tmp", 0o1777)
    os.chmod(f"{HOME}/tmp", 0o1777)
    shm = f"size={work_mb * MiB},mode=1777".encode()
    _check(libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, shm), f"mount {SHM}")
    # Pseudo-terminals of its own: the server's /dev/pts is one instance, where a pty one learner
    # process opened is another's to open (its owner is the same nobody).
    _check(libc.mount(b"devpts", b"/dev/pts", b"devpts", _MS_NOSUID | _MS_NOEXEC,
                      b"newinstance,ptmxmode=0666,mode=0620"), "mount /dev/pts")
    learner = os.fork()
    if not learner:
        _check(libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl")
        return
    os.closerange(3, 65536)  # the init keeps none of the run's fds (the learner process's pipes, its socket)
    while True:  # the init: reap whatever is orphaned to it, until the learner process ends
        pid, status = os.wait()
        if pid == learner:
            _exit_like(status)


def drop_privileges() -> None:
    """Keep no capability and no way to gain one. As root (a server run by root): become nobody, which
    clears them. In a user namespace (a server run by an ordinary user, already nobody there, whose
    capabilities made the namespaces above): clear them. Either way the bounding set is emptied
    first (while CAP_SETPCAP is held), so that nothing exec'd gets one back, and ``no_new_privs``."""
    libc = _libc()
    last = _last_capability()
    for cap in range(last + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")
    with contextlib.suppress(OSError):  # kernels before 4.3 have no ambient set, and so none to clear
        _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT)")
    if os.getuid() == 0:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    _check(libc.capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), (_CapData * 2)()), "capset")
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")
    if os.getuid() == 0 or os.geteuid() == 0:
        raise OSError("still root after dropping privileges")


def isolates(work_mb: int) -> bool:
    """Whether a child forked here can enter namespaces of its own and drop its capabilities: a
    kernel or security module may refuse what bubblewrap allowed (root's bubblewrap making an
    ordinary user's namespaces; a policy that takes capabilities from user namespaces). A learner
    server asks before it serves (the grader then execs instead); so does the grader's probe of the
    machine, from a sandbox as a server's (grader/run/isolation.py ``fork_trial``)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            enter_run(work_mb)
            drop_privileges()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _last_capability() -> int:
    """The highest capability this kernel knows (40 on Linux 5.9 and later)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as last:
            return int(last.read())
    except (OSError, ValueError):
        return 40


def join_cgroup(fds: tuple[int, ...]) -> None:
    """In the learner process, before it runs anything: into its run's cgroups (pids, memory)."""
    for fd in fds:
        os.write(fd, b"0")
        os.close(fd)
