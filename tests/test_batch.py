"""``grader batch`` and ``grader merge``, run for real on small classes in tmp_path."""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.commands.batch import _Tail
from grader.run import reaper
from grader.run.isolation import Isolation, probe
from grader.run.launch import Child, Launcher, Spawn
from grader.run.share import Share
from grader.wire.messages import RequestedDevice
from tests.conftest import ROOT, SHARE, STUBS, Batched, ForkLaunchers, copy_solutions, course_with, in_process, run_cli

HEADER = ["learner", "ex1", "ex2", "ex3", "ex4", "ex5", "score", "max_score", "status", "submitted_as"]
SYNTAX_ERROR = "import torch\n\ndef pick_device(:\n    return torch.device('cpu')\n"
EXITS_ON_IMPORT = "import os\nos._exit(3)\n"
ENDLESS_ON_IMPORT = "while True:\n    pass\n"
BatchForked = Callable[..., Batched]  # tests/conftest.py: `grader batch` in this process, from warm servers


def gradebook(out: Path) -> list[dict[str, str]]:
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as file:
        rows = list(csv.reader(file))
    assert rows[0] == HEADER
    return [dict(zip(HEADER, row, strict=True)) for row in rows[1:]]


def report(out: Path, learner: str) -> dict[str, Any]:
    data = yaml.safe_load((out / f"{learner}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def statuses(data: dict[str, Any]) -> set[str]:
    return {c["status"] for ex in data["exercises"].values() for c in ex["checks"]}


def static_class(root: Path, names: tuple[str, ...]) -> Path:
    """Learners whose one cell does not compile: the sandbox still runs (a .py is cells; the others
    might define the functions), and finds nothing to grade."""
    root.mkdir()
    for name in names:
        (root / f"{name}.py").write_text(SYNTAX_ERROR.replace("cpu", name), encoding="utf-8")
    return root


def test_batch_grades_every_learner_with_progress_gradebook_and_summary(tmp_path: Path) -> None:
    cls = tmp_path / "class"
    cls.mkdir()
    copy_solutions(cls, "alice", only=("ex1", "ex3"))
    shutil.copytree(STUBS, cls / "bob")
    (cls / "carol.py").write_text(SYNTAX_ERROR, encoding="utf-8")
    (cls / "dave.py").write_text(EXITS_ON_IMPORT, encoding="utf-8")
    for ignored in (".ipynb_checkpoints", "__pycache__", ".git"):
        (cls / ignored).mkdir()
    (cls / ".DS_Store").write_bytes(b"\0\1")
    out = tmp_path / "out"

    proc = run_cli("batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en")

    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "4/4" in proc.stderr  # tqdm's bar
    assert "4 learners: 4 graded, 0 already up to date" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        ".grader-seal", "alice.yaml", "bob.yaml", "carol.yaml", "dave.yaml", "gradebook.csv", "summary.html",
        "summary.yaml"]
    assert (out / ".grader-seal").stat().st_mode & 0o077 == 0  # the seal's key: the grader's user only
    rows = gradebook(out)
    assert [r["learner"] for r in rows] == ["alice", "bob", "carol", "dave"]
    assert rows[0] == {"learner": "alice", "ex1": "20", "ex2": "0", "ex3": "20", "ex4": "0", "ex5": "0",
                       "score": "40", "max_score": "100", "status": "graded", "submitted_as": "alice"}
    assert all(r["score"] == "0" and r["max_score"] == "100" for r in rows[1:])
    alice = report(out, "alice")
    assert alice["learner"] == "alice" and alice["score"] == 40.0
    assert len(alice["submission_sha256"]) == len(alice["course_sha256"]) == 64
    assert alice["requested_device"] == "auto" and alice["lang"] == "en"
    assert statuses(report(out, "bob")) == {"not_attempted"}
    carol = report(out, "carol")  # pick_device does not compile; nothing else is there
    assert statuses(carol) == {"error", "not_attempted"}
    assert "carol.py, line 3" in carol["exercises"]["ex1"]["checks"][0]["message"]
    dave = report(out, "dave")  # its top level ends the process: recorded, and no function is defined
    assert statuses(dave) == {"not_attempted"}
    assert [(s["where"], s["kind"]) for s in dave["top_level"]] == [("dave.py, line 2", "ended_process")]
    summary = yaml.safe_load((out / "summary.yaml").read_text(encoding="utf-8"))
    assert summary["learners"] == 4
    assert sum(b["learners"] for b in summary["distribution"]) == 4
    assert summary["distribution"][0]["learners"] == 3 and summary["distribution"][4]["learners"] == 1


def test_rerun_grades_only_learners_whose_submission_changed(tmp_path: Path, batch_forked: BatchForked) -> None:
    cls = static_class(tmp_path / "class", ("ann", "ben", "cam", "dan"))
    out = cls / "grades"  # inside the submissions folder: never taken for a learner
    first = batch_forked(str(cls), "-o", str(out))
    assert first.returncode == 0, first.stderr
    assert "4 graded" in first.stdout
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.yaml")}

    again = batch_forked(str(cls), "-o", str(out))
    assert "0 graded, 4 already up to date" in again.stdout
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.yaml") if p.stem != "summary"} == {
        k: v for k, v in stamps.items() if k != "summary.yaml"}

    (cls / "ben.py").write_text(SYNTAX_ERROR + "# changed\n", encoding="utf-8")
    (out / "cam.yaml").unlink()  # a report lost
    (out / "dan.yaml").write_text("score: [half written", encoding="utf-8")  # not a report
    changed = batch_forked(str(cls), "-o", str(out))
    assert "3 graded, 1 already up to date" in changed.stdout
    assert (out / "ann.yaml").stat().st_mtime_ns == stamps["ann.yaml"]
    assert report(out, "dan")["learner"] == "dan"
    assert [r["learner"] for r in gradebook(out)] == ["ann", "ben", "cam", "dan"]

    forced = batch_forked(str(cls), "-o", str(out), "--force")
    assert "4 graded, 0 already up to date" in forced.stdout

    english = batch_forked(str(cls), "-o", str(out), "--lang", "en")  # a report in another language
    assert "4 graded" in english.stdout


def test_endless_hostile_and_linked_learners_cost_only_their_own_report(tmp_path: Path,
                                                                       batch_forked: BatchForked) -> None:
    # The loop is stopped at its cell's limit, cut from 10 s to 3 s here: what is shown is that it is stopped.
    course = course_with(tmp_path, {"run_timeout_s: 300": "run_timeout_s: 30",
                                    "cell_timeout_s: 10": "cell_timeout_s: 3"})
    cls = tmp_path / "class"
    cls.mkdir()
    (cls / "endless.py").write_text(ENDLESS_ON_IMPORT, encoding="utf-8")
    (cls / "exits.py").write_text(EXITS_ON_IMPORT, encoding="utf-8")
    (cls / "fine.py").write_text(SYNTAX_ERROR, encoding="utf-8")
    (cls / "linked.py").symlink_to("/proc/self/mem")  # followed, reading it failed with EIO
    out = tmp_path / "out"

    proc = batch_forked(str(cls), "-o", str(out), "--workers", "2", "--course", str(course))

    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert [r["learner"] for r in gradebook(out)] == ["endless", "exits", "fine", "linked"]
    endless = report(out, "endless")
    # A top level that loops or exits is stopped and recorded; the files define no function.
    assert endless["score"] == 0.0 and statuses(endless) == {"not_attempted"}
    assert [stop["kind"] for stop in endless["top_level"]] == ["timeout"]
    assert endless["learner_seconds"] < 60  # stopped at its top-level budget, its processes up
    exits = report(out, "exits")
    assert statuses(exits) == {"not_attempted"}
    assert [stop["kind"] for stop in exits["top_level"]] == ["ended_process"]
    fine = report(out, "fine")  # pick_device's statement does not compile: its checks say so
    assert {c["status"] for c in fine["exercises"]["ex1"]["checks"] if "pick_device" in c["id"]} == {"error"}
    linked = report(out, "linked")  # a link is never followed (issue 23): the learner's, not the grader's
    assert linked["grader_error"] is None and linked["score"] == 0.0 and statuses(linked) == {"error"}
    assert "symbolic link" in linked["exercises"]["ex1"]["checks"][0]["message"]

    rerun = batch_forked(str(cls), "-o", str(out), "--course", str(course))
    assert "0 graded, 4 already up to date" in rerun.stdout


def test_a_report_changed_after_grading_is_regraded_and_never_merged(tmp_path: Path, batch_forked: BatchForked) -> None:
    cls = static_class(tmp_path / "class", ("ann", "ben"))
    out = tmp_path / "out"
    assert batch_forked(str(cls), "-o", str(out)).returncode == 0
    honest = report(out, "ann")
    forged = dict(honest, score=100.0)  # what a learner's daemon, or a hand edit, would write
    (out / "ann.yaml").write_text(yaml.safe_dump(forged, allow_unicode=True, sort_keys=False), encoding="utf-8")
    merge = run_cli("merge", str(out), "-o", str(tmp_path / "merged"))
    assert merge.returncode == 2 and "ann.yaml was changed after the grader wrote it" in merge.stderr
    again = batch_forked(str(cls), "-o", str(out))
    assert "1 graded, 1 already up to date" in again.stdout
    assert report(out, "ann")["score"] == honest["score"]
    assert [r["score"] for r in gradebook(out)] == [f"{honest['score']:g}", f"{report(out, 'ben')['score']:g}"]


def test_shards_partition_the_class_and_merge_rebuilds_one_gradebook(tmp_path: Path, batch_forked: BatchForked) -> None:
    names = ("ann", "ben", "cam", "dan", "eve")
    cls = static_class(tmp_path / "class", names)
    shards = [tmp_path / f"shard-{k}" for k in (1, 2)]
    for k, shard in enumerate(shards, 1):
        proc = batch_forked(str(cls), "-o", str(shard), "--shard", f"{k}/2")
        assert proc.returncode == 0, proc.stderr
    graded = [[r["learner"] for r in gradebook(shard)] for shard in shards]
    assert graded == [["ann", "ben"], ["cam", "dan", "eve"]]

    merged = tmp_path / "merged"
    proc = run_cli("merge", *map(str, shards), "-o", str(merged))
    assert proc.returncode == 0, proc.stderr
    assert [r["learner"] for r in gradebook(merged)] == list(names)
    assert sorted(p.stem for p in merged.glob("*.yaml")) == sorted([*names, "summary"])
    summary = yaml.safe_load((merged / "summary.yaml").read_text(encoding="utf-8"))
    assert summary["learners"] == 5
    assert (merged / "summary.html").is_file()

    # The merged folder is a batch output like any other: nothing left to grade there.
    rerun = batch_forked(str(cls), "-o", str(merged))
    assert "0 graded, 5 already up to date" in rerun.stdout

    overlap = run_cli("merge", str(shards[0]), str(merged), "-o", str(tmp_path / "again"))
    assert overlap.returncode == 2
    assert "learner 'ann' is in both" in overlap.stderr


SEES_ITS_SHARE = """
import os
import torch

def pick_device():
    switches = sorted(name for name in os.environ if "GRADER" in name)
    seen = (os.environ.get("OMP_NUM_THREADS"), str(torch.get_num_threads()), switches,
            os.environ.get("OMP_WAIT_POLICY"))
    # A torch.device only when the sandbox got its share of the cores, OpenMP's idle threads sleeping, and
    # no switch of the grader's beside it (its GPU share comes in its start request); a str fails the check.
    expected = ({threads!r}, {threads!r}, {switches!r}, "PASSIVE")
    return torch.device("cpu") if seen == expected else repr(seen)
"""


def test_workers_split_the_cores_between_sandboxes(tmp_path: Path) -> None:
    """Each learner process gets its share of the threads (its GPU share: tests/test_launch.py)."""
    cls = tmp_path / "class"
    threads = str(max(1, len(os.sched_getaffinity(0)) // 2))
    (cls / "probe").mkdir(parents=True)
    # No mark that it is graded (issue 22): the run token only where no sandbox holds its processes.
    switches = ["GRADER_RUN_TOKEN"] if probe().mode == "none" else []
    (cls / "probe" / "ex1_device.py").write_text(SEES_ITS_SHARE.format(threads=threads, switches=switches),
                                                 encoding="utf-8")
    env_free = {k: v for k, v in os.environ.items()
                if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")}
    proc = subprocess.run([sys.executable, "-m", "grader", "batch", str(cls), "-o", str(tmp_path / "out"),
                           "--workers", "2", "--lang", "en"], capture_output=True, text=True, cwd=ROOT,
                          env={**env_free, "PYTHONPATH": str(ROOT)}, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    check = report(tmp_path / "out", "probe")["exercises"]["ex1"]["checks"][0]
    assert check["id"] == "ex1.pick_device_returns_device"
    assert check["status"] == "passed", check["message"]


def _counted(out: Path, learner: str) -> bool:
    """Whether ``learner`` has a row in the gradebook of ``out`` (written as their grading ends)."""
    try:
        lines = (out / "gradebook.csv").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any(row and row[0] == learner for row in csv.reader(lines))


def _as_from_a_terminal() -> None:
    """Ctrl-C's default action, as a shell at a terminal starts a command with. A test run started in
    the background by a non-interactive shell (`cmd &`, as CI scripts do) has SIGINT ignored, its
    children inherit that, and Python then installs no KeyboardInterrupt handler: the Ctrl-C this test
    sends did nothing, the run graded all three and exited 0 (twice in the fresh-clone CI)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _learner_running(pid: int) -> bool:
    """Whether a learner process runs now under the grader ``pid`` (grader/run/reaper.py ``run_tree``): an
    exec'd one (``-m grader.learner`` on its or its sandbox's command line, where bubblewrap runs as an
    ordinary user: ``Isolation.learners_fork``) or one a learner fork server forked (its descendants carry
    its command line: a fork does not exec), the server itself not counted."""
    server = b"grader.spawn.forkserver\0learner"
    lines: dict[int, bytes] = {}
    for process in reaper.run_tree(pid):
        with contextlib.suppress(OSError):
            lines[process] = Path(f"/proc/{process}/cmdline").read_bytes()
    servers = [p for p, line in lines.items() if server in line]
    return (any(child != s and server in lines.get(child, b"") for s in servers for child in reaper.run_tree(s))
            or any(b"-m\0grader.learner\0" in line for line in lines.values()))


def test_an_interrupted_run_keeps_what_it_finished(tmp_path: Path, batch_forked: BatchForked) -> None:
    cls = static_class(tmp_path / "class", ("a_first", "c_last"))
    slow = copy_solutions(cls, "b_slow", only=("ex1",)) / "ex1_device.py"
    slow.write_text("import time\ntime.sleep(5)\n" + slow.read_text(encoding="utf-8"), encoding="utf-8")
    # The Ctrl-C must come while b_slow is graded: once a_first is counted (its gradebook row, the last
    # thing done for it) and a learner process runs again (b_slow's: its top level sleeps 5 s).
    # Sent as soon as a_first's report existed, it once came before the worker took b_slow.
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "batch", str(cls), "-o", str(out), "--workers", "1"]
    with subprocess.Popen(command, cwd=ROOT, env={**os.environ, **SHARE.env, "PYTHONPATH": str(ROOT)},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_as_from_a_terminal) as proc:  # noqa: PLW1509 - before exec
        deadline = time.monotonic() + 120
        while (not (_counted(out, "a_first") and _learner_running(proc.pid))
               and proc.poll() is None and time.monotonic() < deadline):
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before b_slow's learner process was seen"
        proc.send_signal(signal.SIGINT)  # Ctrl-C while b_slow is being graded
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "grader: interrupted" in stderr
    # The learner in progress was finished, the one not started was dropped; the gradebook agrees.
    assert sorted(p.stem for p in out.glob("*.yaml")) == ["a_first", "b_slow", "summary"]
    assert [r["learner"] for r in gradebook(out)] == ["a_first", "b_slow"]
    assert report(out, "b_slow")["exercises"]["ex1"]["score"] == 20.0

    rerun = batch_forked(str(cls), "-o", str(out))
    assert "1 graded, 2 already up to date" in rerun.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("--shard", "3/2"), "--shard: '3/2' must be K/N with 1 <= K <= N"),
    (("--shard", "two"), "--shard: 'two' must be K/N"),
    (("--workers", "0"), "--workers: 0 must be at least 1"),
])
def test_bad_options_are_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    cls = static_class(tmp_path / "class", ("ann",))
    proc = run_cli("batch", str(cls), "-o", str(tmp_path / "out"), *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_clashing_and_reserved_names_are_learners_each(tmp_path: Path, batch_forked: BatchForked) -> None:
    """Two entries of one stem, and names of the class files: each a learner of its own
    (tests/test_hostile_names.py grades a class of such names)."""
    cls = static_class(tmp_path / "class", ("ann", "summary", "gradebook"))
    (cls / "ann.ipynb").write_text("{}", encoding="utf-8")
    out = tmp_path / "out"
    proc = batch_forked(str(cls), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = {row["submitted_as"]: row["learner"] for row in gradebook(out)}
    assert rows["ann.py"] == "ann.py" and rows["ann.ipynb"] == "ann.ipynb"
    assert rows["summary.py"].startswith("summary-") and rows["gradebook.py"].startswith("gradebook-")
    assert yaml.safe_load((out / "summary.yaml").read_text(encoding="utf-8"))["learners"] == 4


def test_missing_submissions_folder_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli("batch", str(tmp_path / "nowhere"), "-o", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "submissions folder not found" in proc.stderr


def test_only_the_last_learner_to_start_once_one_ended_runs_in_lanes() -> None:
    """grader/commands/batch.py ``_Tail``, on the clock it is given: the last learner to start runs in lanes
    where the grading still under way has run a quarter of the mean grading, never beside one just begun."""
    tail = _Tail(4, lanes=2)
    first, second = tail.start(0.0), tail.start(0.0)  # two workers: the first two at once
    assert (first[1], second[1]) == (1, 1)
    tail.end(first[0], 1.0)  # a grading takes 1 s
    assert tail.start(1.0)[1] == 1  # the third: another still waits
    tail.end(second[0], 1.1)
    assert tail.start(1.1)[1] == 1  # the last, beside the third begun 0.1 s ago: one lane
    late = _Tail(3, lanes=2)
    a, b = late.start(0.0), late.start(0.0)
    late.end(a[0], 1.0)
    late.end(b[0], 1.0)
    assert late.start(1.0)[1] == 2  # nothing else under way: the last has both cores
    mid = _Tail(3, lanes=2)
    a, b = mid.start(0.0), mid.start(0.5)
    mid.end(a[0], 1.0)
    assert mid.start(1.0)[1] == 2  # beside one half done: lanes
    pair = _Tail(2, lanes=2)
    assert [pair.start(0.0)[1], pair.start(0.0)[1]] == [1, 1]  # no larger than its workers: none in lanes
    alone = _Tail(2, lanes=1)  # a machine that allows one lane (one core, a GPU, exec'd processes)
    alone.end(alone.start(0.0)[0], 1.0)
    assert alone.start(1.0)[1] == 1


class _Judges:
    """The suite's launchers, counting the judges a batch starts: one a run, two for a learner in lanes."""

    def __init__(self, inner: ForkLaunchers) -> None:
        self.inner = inner
        self.judges = 0
        self._lock = threading.Lock()

    def lanes(self, device: RequestedDevice, isolation: Isolation) -> int:
        return self.inner.lanes(device, isolation)

    def grading(self, isolation: Isolation, lanes: int) -> contextlib.AbstractContextManager[Launcher]:
        return self.inner.grading(isolation, lanes)

    @contextlib.contextmanager
    def batch(self, fork: bool, share: Share, isolation: Isolation) -> Iterator[Launcher]:
        with self.inner.batch(fork, share, isolation) as launcher:
            yield _Counting(launcher, self)


class _Counting:
    def __init__(self, launcher: Launcher, judges: _Judges) -> None:
        self.launcher, self.judges = launcher, judges
        self.isolation = launcher.isolation

    def prepare(self, spawn: Spawn) -> None:
        self.launcher.prepare(spawn)

    def start(self, spawn: Spawn) -> Child:
        if spawn.role == "judge":
            with self.judges._lock:
                self.judges.judges += 1
        return self.launcher.start(spawn)


def test_a_class_s_last_learner_runs_in_lanes_with_the_same_verdicts(tmp_path: Path,
                                                                        fork_launchers: ForkLaunchers) -> None:
    """grader/commands/batch.py ``_Tail``: on one worker, the second of two learners starts once the first
    ended, and runs the course's two lanes (two judges); on two workers, two learners start at once, each in
    one lane. Every learner's verdicts are the reference's."""
    isolation = probe()
    if fork_launchers.lanes("auto", isolation) < 2:
        pytest.skip("this machine runs one lane a grading (one core, a GPU, or learner processes exec'd)")
    cls = tmp_path / "class"
    for i in range(2):
        copy_solutions(cls, f"learner{i}")
    for workers, judges in (("1", 3), ("2", 2)):
        counted = _Judges(fork_launchers)
        out = tmp_path / f"out{workers}"
        code, _, err = in_process(["batch", str(cls), "-o", str(out), "--workers", workers, "--lang", "en",
                                   "--quiet"], counted)  # type: ignore[arg-type]
        assert code == 0, err
        assert counted.judges == judges
        rows = gradebook(out)
        assert [row["score"] for row in rows] == [row["max_score"] for row in rows] and len(rows) == 2
