"""Submissions and the learner process's bytes are hostile input (issue 23).

* What the grader reads before any sandbox exists: a folder whose exercise files are symbolic
  links to the course's own solutions, a class entry that is a link to them, a 300 MB notebook.
  No link is followed, sizes are bounded before anything is parsed, and the grader's own memory
  stays bounded.
* What the judge reads from the learner process: frames written straight into its socket, under
  the number of the request in flight, holding values no honest encoder makes (a 60-byte frame that
  asked the judge for a 150 MB object, a tensor of negative shape, an integer of 4,000 digits, a
  device that does not exist, NaN where JSON has none, 20 million empty objects) and four top-level
  events with 50 MB labels to relay. Each is the learner's protocol break on the check it answered,
  never the grader's error, and the judge's memory stays bounded.
* The learner process's memory limit counts memory held through memfd_create.
* A learner that sleeps just under every deadline is stopped by the wall-clock bound the instructor
  sets, says so in its report, and heads the summary's slowest learners.

Each attacker sits in one ``grader batch`` among correct neighbours (one batch for the module,
one for the sleeper), and the ones that attack the judge are also graded by ``grader grade``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, SHARE, copy_solutions, course_with, folder_with, solution_text
from tests.hostile_corpus import RAW_FRAMES, SOLUTIONS
from tests.submissions.catalog import MODULES

MiB = 1024 * 1024
PROTOCOL = "Your code wrote to the grader's connection"  # learner_broke_protocol's message (en)
GRADER_FAULT = "The grader itself hit an error"  # grader_internal's message (en)

# Each hostile answer ends the run it is in (the judge stops at a protocol break) and the next run
# grades the checks left, so each goes in a function few checks call: seven runs in all.
FRAMES_EX1 = RAW_FRAMES + solution_text("ex1") + '''
_honest_describe = describe_device

def describe_device(device):
    if device.type == "cpu":  # 60 MB of "{}," that once made 1.4 GiB of dicts in the judge
        _frame(b'{"$msg":"Returned","value":[' + b"{}," * 20_000_000 + b'{}]}')
    elif device.type == "cuda":  # JSON has no NaN
        _frame(b'{"$msg":"Returned","value":[NaN,Infinity]}')
    else:  # a device that does not exist
        _answer({"$device": "cuda:99999999999999999999"})
    return _honest_describe(device)
'''
FRAMES_EX2 = RAW_FRAMES + solution_text("ex2") + '''
def speedup(n, device, repeats=3):  # 4,000 digits: no float holds it
    _answer(10 ** 4000)
    return 1.0
'''
FRAMES_EX3 = RAW_FRAMES + solution_text("ex3") + '''
def to_numpy(t):
    if t.requires_grad:  # four elements' bytes, and a shape no tensor has
        _answer({"$tensor": {"dtype": "float32", "shape": [-2, -2], "data": "AAAAAAAAAAAAAAAAAAAAAA==",
                             "device": "cpu", "requires_grad": False, "pinned": False}})
    else:  # a 60-byte value that asked the judge for a 150 MB numpy.void
        _answer({"$npscalar": {"dtype": "|V1", "value": 150_000_000}})
    return t.detach().cpu().numpy()
'''
FRAMES = {"ex1_device": FRAMES_EX1, "ex2_timing": FRAMES_EX2, "ex3_roundtrip": FRAMES_EX3,
          "ex4_oom": solution_text("ex4"), "ex5_amp": solution_text("ex5")}

LABELS = RAW_FRAMES + '''
def _relay():  # a top-level event whose label is 50 MB, for the judge to relay to the grader
    _frame({"$msg": "TopLevelEvent", "event": "imported", "module": "submission", "label": "x" * (50 * 2**20)})

_relay()
_relay()
_relay()
_relay()
''' + solution_text("ex1")

MEMFD = solution_text("ex3").replace("def roundtrip(", "def _roundtrip(") + '''
import mmap, os

def roundtrip(x, device):  # 1.5 GiB held through memfd_create, in files under the file-size limit
    held = []
    for _ in range(8):
        fd = os.memfd_create("held")
        os.ftruncate(fd, 192 * 2**20)
        area = mmap.mmap(fd, 192 * 2**20)
        for offset in range(0, len(area), 4096):
            area[offset] = 1
        held.append(area)
    return _roundtrip(x, device)
'''

# A check's limit cut to 5 s (course.yaml's is 30): the sleeper stays 3 s under it at every check, however
# busy the machine, so only the instructor's bound stops it, a few checks in (the test's wall: 32 -> ~15 s).
# The bound counts from the processes being up; ex1's checks (0.2 CPU-s a learner, idle) come first, inside it.
CHECK_TIMEOUT_S = 5
SLEEPER = solution_text("ex1") + f'''
import time

def _sleepy(*args, **kwargs):
    time.sleep({CHECK_TIMEOUT_S - 3})

time_matmul = speedup = roundtrip = to_numpy = fill_until_oom = train_step_with_backoff = train_steps = _sleepy
'''
WALL_CLOCK_S = 10


def _measured(*args: str) -> tuple[subprocess.CompletedProcess[str], int, int]:
    """``grader ARGS`` in a fresh interpreter that then prints its own peak memory and its
    children's (judges, learner processes, fork servers: every waited-for descendant), in bytes.

    Its own peak is VmHWM, the high-water mark of its own address space, not ``ru_maxrss`` of
    RUSAGE_SELF: Linux carries a process's ``maxrss`` across ``execve`` from the address space it
    replaced (``setmax_mm_hiwater_rss`` in exec_mmap), which for a child vforked by this pytest
    process is this process's own. An xdist worker that had imported torch for an earlier test made
    the grader's "own" peak 385 MB (46 MB run alone); VmHWM is the exec'd interpreter's alone."""
    wrapper = (
        "import resource, runpy, sys\n"
        f"sys.argv = ['grader', *{list(args)!r}]\n"
        "try:\n    runpy.run_module('grader', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "own = next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
        "print('PEAK', own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, **SHARE.env, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, check=False, cwd=ROOT,
                          env=env, timeout=1800)
    peak = next(line for line in proc.stderr.splitlines() if line.startswith("PEAK")).split()
    return proc, int(peak[1]) * 1024, int(peak[2]) * 1024


def memory_cgroup() -> bool:
    """Whether this machine lets the grader put a run in a memory cgroup (root, cgroup v1 or v2)."""
    v1, v2 = Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")
    has = (v1 / "memory.limit_in_bytes").exists() or "memory" in (
        (v2 / "cgroup.controllers").read_text() if (v2 / "cgroup.controllers").exists() else "")
    return os.geteuid() == 0 and has


@dataclass(frozen=True)
class ClassRun:
    proc: subprocess.CompletedProcess[str]
    own_peak: int
    out: Path

    def report(self, learner: str) -> dict[str, Any]:
        data = yaml.safe_load((self.out / f"{learner}.yaml").read_text(encoding="utf-8"))
        assert isinstance(data, dict)
        return data


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> ClassRun:
    root = tmp_path_factory.mktemp("hostile-bytes")
    cls = root / "class"
    copy_solutions(cls, "correct")
    folder_with(cls, "frames", FRAMES)
    (cls / "labels.py").write_text(LABELS, encoding="utf-8")
    linked = cls / "linked"
    linked.mkdir()
    for module in MODULES.values():
        (linked / f"{module}.py").symlink_to(SOLUTIONS / f"{module}.py")
    (cls / "linkdir").symlink_to(SOLUTIONS, target_is_directory=True)
    with open(cls / "huge.ipynb", "wb") as huge:  # sparse: 300 MB to read, nothing on disk
        huge.truncate(300 * MiB)
    folder_with(cls, "memfd", {"ex1_device": solution_text("ex1"), "ex3_roundtrip": MEMFD})
    course = course_with(root, {"memory_mb: 6144": "memory_mb: 1024"})
    out = root / "out"
    proc, own, _ = _measured("batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en", "--quiet",
                             "--course", str(course))
    return ClassRun(proc, own, out)


def test_the_class_is_graded_around_every_attacker(graded: ClassRun) -> None:
    assert graded.proc.returncode == 0, graded.proc.stderr[-3000:]
    assert "Traceback" not in graded.proc.stderr
    assert graded.report("correct")["score"] == 100.0


def test_no_link_is_followed_out_of_a_submission(graded: ClassRun) -> None:
    for learner in ("linked", "linkdir"):
        report = graded.report(learner)
        assert report["score"] == 0.0, learner
        messages = [c["message"] for ex in report["exercises"].values() for c in ex["checks"]]
        assert all("symbolic link" in message for message in messages), (learner, messages[:3])


def test_a_huge_notebook_is_refused_before_it_is_read(graded: ClassRun) -> None:
    report = graded.report("huge")
    assert report["score"] == 0.0
    message = report["exercises"]["ex1"]["checks"][0]["message"]
    assert "300 MiB" in message and "larger than" in message, message
    # The grader's own process (no torch in it) never held the notebook.
    assert graded.own_peak < 250 * MiB, graded.own_peak


def _checks(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for ex in report["exercises"].values() for c in ex["checks"]]


def _judged_as_protocol_breaks(report: dict[str, Any]) -> None:
    checks = _checks(report)
    assert not [c["id"] for c in checks if GRADER_FAULT in c["message"]]
    assert all(c["status"] in ("passed", "failed") for c in checks), [(c["id"], c["status"]) for c in checks]
    broken = {c["id"] for c in checks if PROTOCOL in c["message"]}
    assert {"ex1.describe_device_cpu", "ex1.describe_device_cuda", "ex1.describe_device_mps", "ex2.speedup_consistent",
            "ex3.to_numpy_cpu", "ex3.to_numpy_grad_and_device"} <= broken, broken
    assert {c["id"] for c in checks if c["status"] == "failed"} == broken
    assert "tampering" in report["notes"]
    # Around them, what is honest is graded: pick_device, ex2's timing, roundtrip, ex4, ex5.
    assert report["exercises"]["ex4"]["score"] == report["exercises"]["ex5"]["score"] == 20.0
    assert all(c["status"] == "passed" for c in checks if c["id"] not in broken)


def test_hostile_frames_are_the_learners_protocol_break_in_a_batch(graded: ClassRun) -> None:
    _judged_as_protocol_breaks(graded.report("frames"))


def test_hostile_frames_in_grader_grade_leave_the_judge_small(tmp_path: Path) -> None:
    submission = folder_with(tmp_path, "frames", FRAMES)
    out = tmp_path / "frames.yaml"
    proc, _, children = _measured("grade", str(submission), "-o", str(out), "--lang", "en", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _judged_as_protocol_breaks(yaml.safe_load(out.read_text(encoding="utf-8")))
    # The judge refuses each value before building it (it once held 1.4 GiB); the learner process
    # holds its own 60 MB frame twice.
    assert children < 1024 * MiB, children


def test_huge_labels_are_not_relayed(graded: ClassRun) -> None:
    report = graded.report("labels")
    assert report["exercises"]["ex1"]["score"] == 20.0
    assert (graded.out / "labels.yaml").stat().st_size < 200_000
    assert "tampering" in report["notes"]
    # Each relay ends its run at the judge; the next run skips that cell and goes on.
    lines = [n for n, line in enumerate(LABELS.split("\n"), 1) if line == "_relay()"]
    assert [stop["where"] for stop in report["top_level"]] == [f"labels.py, line {n}" for n in lines]
    assert all("connection" in stop["message"] for stop in report["top_level"]), report["top_level"]


@pytest.mark.skipif(not memory_cgroup(), reason="no memory cgroup here (not root): shared memory is not counted")
def test_memory_held_through_memfd_counts_toward_the_limit(graded: ClassRun) -> None:
    report = graded.report("memfd")
    assert report["exercises"]["ex1"]["score"] == 20.0
    check = next(c for c in report["exercises"]["ex3"]["checks"] if c["id"] == "ex3.roundtrip_values")
    assert check["status"] == "error", check
    assert "memory" in check["message"], check["message"]


def test_the_judge_runs_under_a_memory_limit_of_its_own() -> None:
    """What the judge applies to itself (grader/spawn/confine.py), for the judge and for the learner."""
    probe = ("import resource, sys; from grader.spawn.confine import apply_limits; "
             "from grader.wire.messages import Limits; "
             "apply_limits(Limits(memory_mb=700, judge_memory_mb=900), judge=sys.argv[1] == 'judge'); "
             "print(resource.getrlimit(resource.RLIMIT_DATA)[0] // 2**20, resource.getrlimit(resource.RLIMIT_CPU)[0])")
    for role, expected in (("judge", "900 -1"), ("learner", "700 600")):
        proc = subprocess.run([sys.executable, "-c", probe, role], capture_output=True, text=True, check=True,
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.stdout.split() == expected.split(), (role, proc.stdout, proc.stderr)


def test_a_sleeper_is_stopped_by_the_instructors_wall_clock_bound(tmp_path: Path) -> None:
    cls = tmp_path / "class"
    cls.mkdir()
    (cls / "sleeper.py").write_text(SLEEPER, encoding="utf-8")
    copy_solutions(cls, "ex1_only", only=("ex1",))
    (cls / "broken.py").write_text("def pick_device(:\n", encoding="utf-8")
    out = tmp_path / "out"
    course = course_with(tmp_path, {"check_timeout_s: 30": f"check_timeout_s: {CHECK_TIMEOUT_S}"})
    proc, _, _ = _measured("batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en", "--quiet",
                           "--learner-timeout", str(WALL_CLOCK_S), "--course", str(course))
    assert proc.returncode == 0, proc.stderr[-3000:]
    sleeper = yaml.safe_load((out / "sleeper.yaml").read_text(encoding="utf-8"))
    assert sleeper["exercises"]["ex1"]["score"] == 20.0  # graded before the bound
    stopped = [c for c in _checks(sleeper) if c["status"] == "timeout"]
    assert stopped and all(f"{WALL_CLOCK_S} s" in c["message"] for c in stopped), stopped[:2]
    assert "wall_clock_limit" in sleeper["notes"]
    neighbour = yaml.safe_load((out / "ex1_only.yaml").read_text(encoding="utf-8"))
    assert neighbour["score"] == 20.0
    assert WALL_CLOCK_S <= sleeper["learner_seconds"] < WALL_CLOCK_S + 60  # what the bound counts (not 300 s)
    summary = yaml.safe_load((out / "summary.yaml").read_text(encoding="utf-8"))
    assert summary["slowest"][0] == {"learner": "sleeper", "seconds": sleeper["learner_seconds"],
                                     "wall_clock_limit": True}
    assert "sleeper" in (out / "summary.html").read_text(encoding="utf-8")


# -- the judge's reading alone (grader/wire/, grader/judge/proxy.py), without grading ---------------
FOUR_FLOATS = "AAAAAAAAAAAAAAAAAAAAAA=="
HOSTILE_VALUES = {
    "npscalar_void": {"$npscalar": {"dtype": "|V1", "value": 150_000_000}},
    "npscalar_string": {"$npscalar": {"dtype": "<U9", "value": "x"}},
    "npscalar_not_a_number": {"$npscalar": {"dtype": "<f8", "value": [1.0] * 9}},
    "negative_shape": {"$tensor": {"dtype": "float32", "shape": [-2, -2], "data": FOUR_FLOATS}},
    "shape_not_a_list": {"$tensor": {"dtype": "float32", "shape": "4", "data": FOUR_FLOATS}},
    "float_shape": {"$tensor": {"dtype": "float32", "shape": [4.0], "data": FOUR_FLOATS}},
    "forty_dims": {"$tensor": {"dtype": "float32", "shape": [1] * 40, "data": "AAAAAA=="}},
    "empty_and_huge": {"$tensor": {"dtype": "float32", "shape": [0, 2**62], "data": ""}},
    "bytes_over_budget": {"$tensor": {"dtype": "uint8", "shape": [12 * MiB], "data": "AAAA" * (4 * MiB)}},
    "void_array": {"$ndarray": {"dtype": "V150000000", "shape": [0], "data": ""}},
    "subarray": {"$ndarray": {"dtype": "(1000,1000)f8", "shape": [0], "data": ""}},
    "object_array": {"$ndarray": {"dtype": "O", "shape": [0], "data": ""}},
    "datetime_array": {"$ndarray": {"dtype": "<M8[s]", "shape": [0], "data": ""}},
    "integer_of_4000_digits": 10**4000,
    "device_out_of_range": {"$device": "cuda:99999999999999999999"},
    "not_a_device": {"$device": "not a device"},
    "float_tag": {"$float": "1e999"},
    "dict_of_text": {"$dict": "abc"},
    "tuple_of_text": {"$tuple": "abc"},
    "opaque_list": {"$opaque": []},
    "reference_in_the_judge": {"$ref": [0, 0]},
    "dtype_list": {"$dtype": ["float32"]},
}


@pytest.mark.parametrize("name", sorted(HOSTILE_VALUES))
def test_the_judge_refuses_a_hostile_value_before_building_it(name: str) -> None:
    from grader.wire.codec import ProtocolError
    from grader.wire.values import decode_value

    with pytest.raises(ProtocolError):
        decode_value(HOSTILE_VALUES[name])


def test_honest_values_cross_unchanged_and_an_oversized_one_goes_opaque() -> None:
    import numpy
    import torch

    from grader.wire.values import Opaque, decode_value, encode_value

    values = [torch.arange(6.0).reshape(2, 3), numpy.arange(4, dtype=numpy.int16), numpy.float32(1.5),
              torch.device("cuda:0"), torch.float16, (1, [2, {"a": 3.5}]), -(2**63), "Nguyễn"]
    for value in values:
        back = decode_value(encode_value(value))
        if isinstance(value, (torch.Tensor, numpy.ndarray)):
            assert type(back) is type(value) and (back == value).all()
        else:
            assert back == value and type(back) is type(value), (value, back)
    assert str(decode_value(encode_value(float("nan")))) == "nan"
    for big in (2**63, torch.zeros(3 * MiB), numpy.zeros(2 * MiB)):  # 8 MiB at most crosses
        assert isinstance(decode_value(encode_value(big)), Opaque)


def test_a_frame_over_the_learner_budget_is_refused_from_its_header() -> None:
    import socket
    import struct

    from grader.wire.codec import ProtocolError
    from grader.wire.framing import LEARNER_BUDGET, Connection

    ours, theirs = socket.socketpair()
    judge = Connection(ours.detach(), budget=LEARNER_BUDGET)
    out = theirs.detach()
    try:
        os.write(out, struct.pack(">II", 60 * MiB, 1))  # the header alone: the judge reads no further
        with pytest.raises(ProtocolError, match="over the"):
            judge.receive(deadline=time.monotonic() + 5)
        judge = Connection(judge.fd, budget=LEARNER_BUDGET)
        many = b'{"$msg":"Returned","value":[' + b"{}," * 600_000 + b"{}]}"
        frames = [struct.pack(">II", len(frame), 1) + frame for frame in (many, b'{"$msg":"Returned","value":NaN}')]
        writer = threading.Thread(target=lambda: [os.write(out, frame[n:n + 65536]) for frame in frames
                                                  for n in range(0, len(frame), 65536)])
        writer.start()
        for _ in frames:  # each read whole, then refused: 600,000 objects; a NaN JSON has none of
            with pytest.raises(ProtocolError):
                judge.receive(deadline=time.monotonic() + 30)
        writer.join()
    finally:
        os.close(out)
        judge.close()


def test_a_lone_surrogate_never_crosses() -> None:
    from grader.wire.codec import decode

    assert decode(b'{"$msg":"Failed","error":"caf\\udce9"}').error == "caf\ufffd"


def test_lines_are_read_whole_in_any_chunks_and_a_line_past_the_limit_is_dropped() -> None:
    from grader.run.sandbox import Lines

    data = b"one\n" + b"x" * 5000 + b"\ntwo\n\nthree"
    for size in (1, 7, 4096, len(data)):
        lines = Lines(limit=1000)
        got = [line for start in range(0, len(data), size) for line in lines.feed(data[start:start + size])]
        assert got == [b"one", b"two", b""] and lines.dropped == 1
        assert lines.feed(b"\n") == [b"three"]


def test_the_judge_relays_only_events_about_cells_it_sent() -> None:
    from grader.judge.proxy import top_level_event
    from grader.wire.codec import ProtocolError
    from grader.wire.messages import Cell, CellStop, TopLevelEvent

    cells = {"submission": (Cell("line 1", 1, 1), Cell("line 2", 2, 3))}
    honest = TopLevelEvent("cell_stop", "submission", 1, "line 2",
                           CellStop("submission", 1, "line 2", 1, "error", "x" * 10_000, ("f",) * 500), ("g" * 900,))
    relayed = top_level_event(honest, cells)
    assert relayed.stop is not None and len(relayed.stop.error) < 400 and len(relayed.stop.kept) == 50
    assert relayed.kept == ("g" * 60,)
    for forged in (TopLevelEvent("cell_start", "other", 0, "line 1"), TopLevelEvent("cell_start", "submission", 5, "x"),
                   TopLevelEvent("cell_start", "submission", 0, "x" * 1000),
                   TopLevelEvent("cell_stop", "submission", 0, "line 1", CellStop("submission", 1, "line 2", None,
                                                                                    "error", ""))):
        with pytest.raises(ProtocolError):
            top_level_event(forged, cells)
