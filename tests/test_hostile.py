"""Hostile and broken submissions: each gets an honest report, in bounded time, and leaves
nothing behind (issue: resource limits, cleanup, tamper resistance)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.run.isolation import probe
from grader.run.share import lanes_here
from tests.conftest import ROOT, Graded, copy_solutions, course_with, folder_with, solution_text, survivors


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            return not any(line.startswith("State:") and "Z" in line for line in status)
    except OSError:
        return False


# `grader grade` execs its child; `grader batch` forks children from a server that imported
# torch once (grader/spawn/forkserver.py), unless --no-fork-server.
SPAWNS = ["grade", "batch", "batch-exec"]
FORKED_TOO = pytest.mark.parametrize("spawn", ["grade", "batch"])  # limits hold in both kinds of sandbox


def _run(spawn: str, request: pytest.FixtureRequest) -> Callable[..., Graded]:
    run: Callable[..., Graded] = request.getfixturevalue("grade" if spawn == "grade" else "batch_one")
    if spawn == "batch-exec":
        return lambda submission, *extra: run(submission, *extra, "--no-fork-server")
    return run


@FORKED_TOO
def test_memory_grab_is_a_memory_limit_result(spawn: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    grab = "import torch\n\ndef roundtrip(x, device):\n    return torch.empty(8 * 2**30 // 4)\n"
    graded = _run(spawn, request)(folder_with(tmp_path / "class", "greedy", {"ex3_roundtrip": grab}))
    check = graded.check("ex3.roundtrip_values")
    assert check["status"] == "error"
    assert "memory limit" in check["message"]


@pytest.mark.parametrize("spawn", SPAWNS)
def test_background_processes_are_gone_after_grading(spawn: str, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    marker = f"leftover-{spawn}-{os.getpid()}"
    spawner = f'''
import os, subprocess, sys, time
SLEEP = [sys.executable, "-c", "import time; time.sleep(300)", "{marker}"]
procs = [subprocess.Popen(SLEEP), subprocess.Popen(SLEEP, start_new_session=True)]
if os.fork() == 0:            # a daemon: double fork, new session, a clean environment
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, SLEEP, {{}})
    os._exit(0)
time.sleep(0.5)
print("started:", sum(1 for p in os.listdir("/proc")
                      if p.isdigit() and "{marker}" in open(f"/proc/{{p}}/cmdline").read()))
''' + solution_text("ex1")
    graded = _run(spawn, request)(folder_with(tmp_path / "class", "spawner", {"ex1_device": spawner}))
    assert graded.exercise("ex1")["status"] == "passed"
    assert "started: 3" in graded.report["output"]  # type: ignore[index]
    time.sleep(0.5)
    assert survivors(marker) == []


@FORKED_TOO
def test_stuck_child_is_killed_after_its_timeout(spawn: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    stuck = '''
import signal, subprocess, time

def to_numpy(t):
    subprocess.Popen(["sleep", "300"])
    signal.signal(signal.SIGALRM, signal.SIG_IGN)   # like code stuck in C: pytest-timeout cannot stop it
    while True:
        time.sleep(0.1)
'''
    course = course_with(tmp_path, {"check_timeout_s: 30": "check_timeout_s: 2"})
    started = time.monotonic()
    graded = _run(spawn, request)(folder_with(tmp_path / "class", "stuck", {"ex3_roundtrip": stuck}),
                                  "--course", str(course))
    assert time.monotonic() - started < 90
    assert graded.check("ex3.to_numpy_cpu")["status"] == "timeout"
    assert graded.check("ex3.to_numpy_grad_and_device")["status"] == "timeout"
    # the checks after each kill ran in a fresh child: roundtrip is simply not attempted
    assert graded.check("ex3.roundtrip_values")["status"] == "not_attempted"


@pytest.mark.parametrize(("writer", "spawn"), [("torch_save", "grade"), ("numpy_save", "batch")])  # both sandboxes
def test_any_writer_past_the_size_limit_is_the_size_limit(writer: str, spawn: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    """A writer whose error names neither limit (torch.save: "[enforce fail at inline_container.cc]
    unexpected pos ..."; numpy's own) is told the size limit too: the learner process looks at its files
    when the code raised, whatever the message."""
    save = {"torch_save": 'torch.save(torch.zeros(2_000_000), "model.pt")',
            "numpy_save": 'numpy.save("weights.npy", numpy.zeros(2_000_000, dtype=numpy.float32))'}[writer]
    code = f"""
import numpy, torch

def roundtrip(x, device):
    {save}
    return x * 2 + 1
"""
    course = course_with(tmp_path, {"file_size_mb: 256": "file_size_mb: 5"})
    graded = _run(spawn, request)(folder_with(tmp_path / "class", "saver", {"ex3_roundtrip": code}),
                                  "--course", str(course))
    check = graded.check("ex3.roundtrip_values")
    assert check["status"] == "error"
    assert "size limit" in check["message"], check["message"]


def test_a_cell_that_fills_the_files_is_the_size_limit(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The top level's cells too: a demo cell whose torch.save runs past the limit stops as the size limit
    (not "raised RuntimeError: [enforce fail ...] unexpected pos"), the definitions after it are made, and
    the exercise loses nothing for it."""
    code = 'import torch\ntorch.save(torch.zeros(2_000_000), "demo.pt")\n' + solution_text("ex3")
    # Past the limit in /dev/shm (its own tmpfs, not the work dir): told by what the write said, as a call is.
    shm = 'with open("/dev/shm/demo.bin", "wb") as f:\n    f.write(b"0" * 6_000_000)\n' + solution_text("ex1")
    course = course_with(tmp_path, {"file_size_mb: 256": "file_size_mb: 5"})
    graded = _run("batch", request)(folder_with(tmp_path / "class", "demo", {"ex3_roundtrip": code, "ex1_device": shm}),
                                    "--course", str(course))
    assert graded.report is not None
    assert [s["kind"] for s in graded.report["top_level"]] == ["file_size", "file_size"], graded.report["top_level"]
    assert all("size limit" in s["message"] for s in graded.report["top_level"]), graded.report["top_level"]
    assert graded.exercise("ex3")["status"] == "passed" and graded.exercise("ex1")["status"] == "passed"


def test_output_flood_is_cut(tmp_path: Path, grade: Callable[..., Graded]) -> None:
    flood = "import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)\n" + solution_text("ex1")
    graded = grade(folder_with(tmp_path, "flood", {"ex1_device": flood}))
    assert graded.report is not None
    assert graded.exercise("ex1")["status"] == "passed"
    assert len(graded.report["output"]) < 300_000
    assert "more bytes of output cut" in graded.report["output"]


def test_big_file_hits_the_file_size_limit(tmp_path: Path, grade: Callable[..., Graded]) -> None:
    writer = '''
def roundtrip(x, device):
    with open("big.bin", "wb") as f:
        for _ in range(20):
            f.write(b"0" * 1_000_000)
    return x * 2 + 1
'''
    course = course_with(tmp_path, {"file_size_mb: 256": "file_size_mb: 5"})
    graded = grade(folder_with(tmp_path, "writer", {"ex3_roundtrip": writer}), "--course", str(course))
    check = graded.check("ex3.roundtrip_values")
    assert check["status"] == "error"
    assert "size limit" in check["message"]


@pytest.mark.skipif(probe().mode != "bwrap", reason="no bubblewrap here: the work dir is the disk's")
@FORKED_TOO
def test_files_that_fill_the_work_dir_hit_the_size_limit(spawn: str, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    """Each file under the limit, together past it (checkpoints saved one per epoch): the sandbox's work
    dir, as large as the limit, is full ("No space left on device"), which is the same limit."""
    writer = '''
def roundtrip(x, device):
    for epoch in range(4):
        with open(f"checkpoint_{epoch}.bin", "wb") as f:
            f.write(b"0" * 2_000_000)
    return x * 2 + 1

def to_numpy(t):
    raise ValueError("my own mistake")
'''
    course = course_with(tmp_path, {"file_size_mb: 256": "file_size_mb: 5"})
    graded = _run(spawn, request)(folder_with(tmp_path / "class", "writer", {"ex3_roundtrip": writer}),
                                  "--course", str(course))
    check = graded.check("ex3.roundtrip_values")
    assert check["status"] == "error"
    assert "size limit" in check["message"], check["message"]
    # A later call that only raised, in the work dir the first one filled, keeps its own message.
    later = graded.check("ex3.to_numpy_cpu")
    assert later["status"] == "error" and "my own mistake" in later["message"], later["message"]


@pytest.mark.skipif(probe().mode != "bwrap", reason="no bubblewrap here: the work dir is the disk's")
def test_a_call_that_writes_into_files_a_cell_filled_is_the_size_limit(tmp_path: Path,
                                                                       request: pytest.FixtureRequest) -> None:
    """A demo cell fills the work dir; the graded call then saves a checkpoint into it. torch.save fails at
    once ("unexpected pos ..."), and no block changes hands (the dir was full before the call), yet the
    call wrote a file: its check is told the size limit, not torch's words. A call that only raised there
    keeps its own message. A later cell that saves into them is the size limit too."""
    code = '''
# %%
import torch
torch.save(torch.zeros(2_000_000), "demo.pt")

# %%
torch.save({"demo": torch.zeros(100_000)}, "demo_again.pt")

# %%
def roundtrip(x, device):
    torch.save({"x": x, "weights": torch.zeros(100_000)}, "checkpoint.pt")
    return x * 2 + 1

def to_numpy(t):
    raise ValueError("my own mistake")
'''
    course = course_with(tmp_path, {"file_size_mb: 256": "file_size_mb: 5"})
    graded = _run("batch", request)(folder_with(tmp_path / "class", "saver", {"ex3_roundtrip": code}),
                                    "--course", str(course))
    assert graded.report is not None
    assert [s["kind"] for s in graded.report["top_level"]] == ["file_size", "file_size"], graded.report["top_level"]
    check = graded.check("ex3.roundtrip_values")
    assert check["status"] == "error"
    assert "size limit" in check["message"], check["message"]
    later = graded.check("ex3.to_numpy_cpu")
    assert later["status"] == "error" and "my own mistake" in later["message"], later["message"]


@FORKED_TOO
def test_too_many_processes(spawn: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    forker = '''
import os, subprocess, time

def roundtrip(x, device):  # past 16 and the learner process's allowance for torch's threads (task_limit)
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(16 + 2 * (os.cpu_count() or 1) + 24)]
    time.sleep(5)
    return x * 2 + 1
'''
    course = course_with(tmp_path, {"max_processes: 256": "max_processes: 16"})
    graded = _run(spawn, request)(folder_with(tmp_path / "class", "forker", {"ex3_roundtrip": forker}),
                                  "--course", str(course))
    check = graded.check("ex3.roundtrip_values")
    assert check["status"] == "error"
    assert "more than 16 processes and threads" in check["message"]


def test_patched_comparisons_and_grader_modules_do_not_help(tmp_path: Path,
                                                            grade_forked: Callable[..., Graded]) -> None:
    """What it patches lives in its own process, forked or exec'd alike: the verdicts are the judge's."""
    cheat = '''
import torch, numpy
import grader.checks.support.outcomes as outcomes
import grader.checks.support.trusted as trusted
torch.equal = lambda *a, **k: True
torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
numpy.array_equal = lambda *a, **k: True
outcomes.fail = lambda *a, **k: None
trusted.equal = lambda *a, **k: True

def roundtrip(x, device):
    return x            # wrong: no arithmetic

def to_numpy(t):
    return numpy.zeros(1)   # wrong values
'''
    graded = grade_forked(folder_with(tmp_path, "cheat", {"ex3_roundtrip": cheat}))
    for check in ("roundtrip_values", "roundtrip_keeps_dtype", "to_numpy_cpu", "to_numpy_grad_and_device"):
        assert graded.check(f"ex3.{check}")["status"] == "failed", check


def test_global_state_changes_at_import_are_undone(tmp_path: Path, grade: Callable[..., Graded]) -> None:
    prelude = (
        "import torch\n"
        "torch.set_default_dtype(torch.float64)\n"
        "torch.set_grad_enabled(False)\n"
        "torch.manual_seed(1234)\n"
        "torch.set_num_threads(1)\n"
        "torch.set_float32_matmul_precision('medium')\n"  # both APIs: PyTorch then refuses legacy reads
        "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"
    )
    folder = tmp_path / "globals"
    folder.mkdir()
    for module in ("ex3_roundtrip", "ex5_amp"):
        (folder / f"{module}.py").write_text(prelude + (ROOT / "solutions" / f"{module}.py").read_text(), "utf-8")
    graded = grade(folder)
    assert graded.exercise("ex3")["status"] == "passed", graded.exercise("ex3")
    assert graded.exercise("ex5")["status"] == "passed", graded.exercise("ex5")


def test_an_exception_whose_message_cannot_be_read_is_the_learners(tmp_path: Path,
                                                                    grade_forked: Callable[..., Graded]) -> None:
    """A learner exception whose ``__str__`` raises was reported as the grader's own failure inside the
    learner process ("tell the instructor"); it is the learner's error, said with its type."""
    weird = ("import torch\n\n\nclass Weird(Exception):\n    def __str__(self):\n        raise ValueError('no')\n\n\n"
             "def pick_device():\n    raise Weird()\n\n\ndef describe_device(device):\n    raise Weird()\n")
    graded = grade_forked(folder_with(tmp_path, "weird", {"ex1_device": weird}))
    check = graded.check("ex1.pick_device_returns_device")
    assert check["status"] == "error" and "Weird (its message could not be read)" in check["message"], check
    assert "grader" not in check["message"].lower(), check["message"]


def test_deleting_files_cannot_damage_the_grader(tmp_path: Path, grade: Callable[..., Graded]) -> None:
    vandal = "import os, shutil\nshutil.rmtree(os.path.abspath('..'), ignore_errors=True)\n" + solution_text("ex1")
    folder = copy_solutions(tmp_path, "vandal", only=("ex3",))
    (folder / "ex1_device.py").write_text(vandal, encoding="utf-8")
    before = sorted(p.name for p in (ROOT / "grader" / "checks").iterdir())
    graded = grade(folder)
    assert graded.report is not None
    assert graded.exercise("ex3")["status"] == "passed"
    assert sorted(p.name for p in (ROOT / "grader" / "checks").iterdir()) == before
    assert (folder / "ex1_device.py").exists()  # the submission itself is never the work dir
    assert os.path.exists(ROOT / "course.yaml")


def test_cpu_time_limit(tmp_path: Path, grade: Callable[..., Graded]) -> None:
    # It burns for a plain CPU tensor only (to_numpy_cpu's), so that the run after the one it ended
    # does not burn 7 s more in to_numpy_grad_and_device.
    burner = "def to_numpy(t):\n    while not t.requires_grad and t.device.type == 'cpu':\n        pass\n"
    # 7 s of CPU: the learner process's own start (import torch, the device layer) uses about 2; the loop the rest.
    course = course_with(tmp_path, {"cpu_seconds: 900": "cpu_seconds: 7",
                                    "check_timeout_s: 30": "check_timeout_s: 60"})
    graded = grade(folder_with(tmp_path, "burner", {"ex3_roundtrip": burner}), "--course", str(course))
    check = graded.check("ex3.to_numpy_cpu")
    assert check["status"] == "error"
    assert "CPU time" in check["message"]


# Written to the process's stdout itself: a run after the first runs the top level again without printing
# what the first printed (Python's own streams; grader/learner/toplevel.py ``TopLevelLimits.shown``).
FORK_PROBE = ("import os, sys\nos.write(1, f\"forked: {sys.modules['__main__'].__spec__.name == "
              "'grader.spawn.forkserver'}\\n\".encode())\n")


# Its roundtrip checks pass; a call of its to_numpy ends the run it is in, and the grader starts another for the rest.
CRASHES_IN_TO_NUMPY = FORK_PROBE + solution_text("ex3") + """
import os

def to_numpy(t):
    os._exit(3)
"""


@pytest.mark.parametrize("spawn", SPAWNS)
def test_a_grading_execs_its_first_run_and_forks_its_restarts(spawn: str, tmp_path: Path,
                                                               request: pytest.FixtureRequest) -> None:
    """``grader grade`` execs its first judge and learner process and forks the runs after a crash
    from servers started then (grader/run/launch.py ``RestartLauncher``) — or, where it may run the course's
    lanes side by side (grader/run/share.py ``lanes_here``), forks all from servers started at once;
    ``grader batch`` forks all, ``--no-fork-server`` execs all. Each run imports the submission again: its
    top level says how its process started."""
    graded = _run(spawn, request)(folder_with(tmp_path / "class", "probe",
                                              {"ex1_device": solution_text("ex1"),
                                               "ex3_roundtrip": CRASHES_IN_TO_NUMPY}))
    assert graded.exercise("ex1")["status"] == "passed"
    lost = graded.lost("ex3")
    assert lost and all(".to_numpy" in check for check in lost), lost
    started = [line for line in graded.report["output"].splitlines() if line.startswith("forked:")]  # type: ignore[index]
    assert len(started) >= 2, started  # the first run and a restart
    # Where bubblewrap runs as an ordinary user (a CI runner), no learner process is forked (``learners_fork``).
    forks = f"forked: {probe().learners_fork}"
    lanes = lanes_here("auto", probe().learners_fork) > 1
    expected = {"grade": [forks] * len(started) if lanes else ["forked: False"] + [forks] * (len(started) - 1),
                "batch": [forks] * len(started), "batch-exec": ["forked: False"] * len(started)}
    assert started == expected[spawn]


def test_killing_the_fork_server_does_not_stop_grading(tmp_path: Path,
                                                       batch_one_fresh: Callable[..., Graded]) -> None:
    killer = """
import os, signal

def roundtrip(x, device):
    for pid in [os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())]:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)   # the fork server, its parent, whatever it can see
            except OSError:
                pass                           # isolated: nothing it can see is signalable
    return (x.to(device) * 2 + 1).cpu()

def to_numpy(t):
    return t.detach().cpu().numpy()
"""
    folder = folder_with(tmp_path / "class", "killer", {"ex3_roundtrip": killer, "ex1_device": solution_text("ex1")})
    graded = batch_one_fresh(folder)
    assert graded.code == 0, graded.stderr
    assert "Traceback" not in graded.stderr
    assert graded.exercise("ex1")["status"] == "passed"
    assert graded.exercise("ex3")["status"] == "passed"  # the orphaned child finished its checks
