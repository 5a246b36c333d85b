"""Where one ``grader grade`` and one batch learner spend their time; prints a Markdown table.

    python benchmarks/profile_grade.py [--repeats 3] [--learners 6] [--by-exercise 12]

Each figure is CPU seconds (user + sys of the processes the step started, measured by this
process), the figure a busy machine hardly changes; wall seconds beside it. Every process here runs
with ``--isolation none``: the CPU time of processes inside bubblewrap's pid namespace never reaches
this process. Rows:

* the imports each process pays when it is exec'd: the grader's own (``grader.commands.cli``), the
  judge's (torch, pytest, the checks' support), the learner process's (torch, the device layer), and
  ``torch._dynamo``, which the first ``torch.optim`` call of a process imports (sympy, mpmath) — the
  learner process defers it until its code compiles (grader/learner/deferred.py), the judge never needs it;
* one ``grader grade solutions`` (exec'd judge and learner process), and its checks' own seconds
  from the report, exercise by exercise (wall time inside the judge);
* one learner of a ``grader batch --workers 1`` class (processes forked from warm servers);
* one more learner of a ``grader batch --workers 2`` class, by process (``--by-process N``, a class of
  N after a class of 1 on the same warm servers, run in this process): the user and kernel CPU of the
  learner processes and of the judge's (what their servers reaped: /proc's cutime and cstime), the
  servers' own (forking), and the grader's (its threads: starting runs, reading, writing reports);
* with ``--by-exercise N``: what one more learner costs, exercise by exercise — the CPU of a class of
  N learners who each handed in only that exercise's reference solution, less a class of one, over
  N − 1 (the servers' start cancels out; each figure still holds the per-learner fixed part:
  two forks, the judge's pytest session, the protocol) — and the same for the whole course.
What is left of a grading once the imports and the checks are counted is starting the processes,
the sandbox, the protocol and ending the run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import PY, ROOT, Timed, median, timed  # noqa: E402 - after the path is set

from grader.commands.cli import main as grader_main  # noqa: E402
from grader.run.isolation import Isolation  # noqa: E402
from grader.run.launch import ForkLauncher, Launcher  # noqa: E402
from grader.run.share import Share  # noqa: E402
from grader.wire.messages import RequestedDevice  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")

IMPORTS = {
    "bare `python -c pass`": "pass",
    "`import torch`": "import torch",
    "grader's own process (`grader.commands.cli`)": "import grader.commands.cli",
    "judge's imports (torch, pytest, checks' support)":
        "import grader.judge.session, grader.judge.api, pytest, pytest_timeout",
    "learner process's imports (torch, device layer)": "import grader.learner.__main__, grader.learner.runner",
    "`import torch, torch._dynamo` (a first optimizer call, were it not deferred)": "import torch, torch._dynamo",
}


def row(label: str, t: Timed, note: str = "") -> None:
    print(f"| {label} | {t.cpu:.2f} | {t.wall:.2f} | {note} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learners", type=int, default=6)
    parser.add_argument("--by-exercise", type=int, default=0, metavar="N",
                        help="also each exercise's cost a learner, from classes of N and of 1 (N >= 2)")
    parser.add_argument("--by-process", type=int, default=8, metavar="N",
                        help="one more learner by process, from a class of N after one of 1 (0: not measured)")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start\n")
    print("| step | CPU s | wall s | note |")
    print("|---|---:|---:|---|")
    for label, code in IMPORTS.items():
        row(label, median(args.repeats, [PY, "-c", code]))
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        work = Path(tmp)
        solutions = work / "solutions"
        shutil.copytree(ROOT / "solutions", solutions, ignore=shutil.ignore_patterns("__pycache__"))
        out = work / "r.yaml"
        graded = median(args.repeats, [PY, "-m", "grader", "grade", str(solutions), "-o", str(out), "--quiet",
                                       "--isolation", "none"])
        report = yaml.safe_load(out.read_text(encoding="utf-8"))
        row("`grader grade solutions` (exec'd judge + learner process)", graded,
            f"score {report['score']:g}; inside the grader: {report['grading_seconds']:.2f} s wall")
        total = 0.0
        for ex_id, ex in report["exercises"].items():
            seconds = sorted(((float(c.get("seconds") or 0.0), c["id"]) for c in ex["checks"]), reverse=True)
            spent = sum(s for s, _ in seconds)
            total += spent
            top = ", ".join(f"{check.split('.', 1)[1]} {s:.2f}" for s, check in seconds[:2])
            print(f"| &nbsp;&nbsp;{ex_id} checks (judge's wall) | | {spent:.2f} | slowest: {top} |")
        print(f"| &nbsp;&nbsp;all checks | | {total:.2f} | |")
        cls = work / "class"
        for i in range(args.learners):
            shutil.copytree(solutions, cls / f"learner{i:02d}")
        batch = timed([PY, "-m", "grader", "batch", str(cls), "-o", str(work / "out"), "--workers", "1", "--quiet",
                       "--isolation", "none", "--lang", "en"])
        per = Timed(batch.wall / args.learners, batch.cpu / args.learners)
        row(f"one learner of a `grader batch --workers 1` class of {args.learners} (forked)", per,
            "servers' start shared by the class")
        if args.by_process >= 1:
            by_process(work, solutions, args.by_process)
        if args.by_exercise >= 2:
            by_exercise(work, solutions, args.by_exercise)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    return 0


@dataclass(frozen=True)
class Spent:
    """CPU seconds so far: of the servers' reaped children and the servers themselves, by role, and of this process."""

    children: dict[str, tuple[float, float]]  # role -> (user, kernel) of the children it reaped
    servers: float  # the servers' own user + kernel
    grader: float  # this process's (the grader's threads)


class WarmServers:
    """The ``Launchers`` of ``grader.commands.cli.main`` for ``by_process``: every batch forks from one
    ``ForkLauncher``, kept warm between batches, whose servers' pids this process can read."""

    def __init__(self) -> None:
        self.launcher: ForkLauncher | None = None

    def lanes(self, device: RequestedDevice, isolation: Isolation) -> int:
        return 1

    def grading(self, isolation: Isolation, lanes: int) -> contextlib.AbstractContextManager[Launcher]:
        raise NotImplementedError("by_process runs batches only")

    def batch(self, fork: bool, share: Share, isolation: Isolation) -> contextlib.AbstractContextManager[Launcher]:
        if self.launcher is None:
            self.launcher = ForkLauncher(share, isolation)
        return contextlib.nullcontext(self.launcher)

    def spent(self) -> Spent:
        children: dict[str, tuple[float, float]] = {}
        servers = 0.0
        for role, pid in self.launcher.server_pids() if self.launcher else []:
            # /proc/PID/stat after the command's ")": fields 14-17 are utime, stime, cutime, cstime.
            fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
            utime, stime, cutime, cstime = (int(v) / TICK for v in fields[11:15])
            user, kernel = children.get(role, (0.0, 0.0))
            children[role] = (user + cutime, kernel + cstime)
            servers += utime + stime
        own = resource.getrusage(resource.RUSAGE_SELF)
        return Spent(children, servers, own.ru_utime + own.ru_stime)


def by_process(work: Path, solutions: Path, learners: int) -> None:
    """One more learner of a ``--workers 2`` class, by process (``--by-process``); ``--isolation none``:
    a sandboxed server's children are reaped inside its sandbox, out of sight."""
    warm = WarmServers()
    spent: list[Spent] = []
    wall = 0.0
    try:
        for size in (1, learners):
            cls = work / f"by-process-{size}"
            for i in range(size):
                shutil.copytree(solutions, cls / f"learner{i:02d}")
            argv = ["batch", str(cls), "-o", f"{cls}-out", "--workers", "2", "--quiet", "--isolation", "none",
                    "--lang", "en"]
            started = time.perf_counter()
            with contextlib.redirect_stdout(None):
                if grader_main(argv, launchers=warm) != 0:
                    raise SystemExit(f"failed: grader {' '.join(argv)}")
            wall = time.perf_counter() - started
            spent.append(warm.spent())
    finally:
        if warm.launcher is not None:
            warm.launcher.close()
    first, last = spent
    more = max(learners - 1, 1)

    def cell(value: float) -> str:
        return f"{value / more:.2f}"

    total = 0.0
    print(f"| one more learner of a `grader batch --workers 2` class of {learners}, by process | | "
          f"{wall / learners:.2f} | after a class of 1 on the same warm servers (`--isolation none`) |")
    for role in ("learner", "judge"):
        (user0, kernel0), (user1, kernel1) = first.children.get(role, (0.0, 0.0)), last.children.get(role, (0.0, 0.0))
        total += user1 - user0 + kernel1 - kernel0
        print(f"| &nbsp;&nbsp;{role} process: its code | {cell(user1 - user0)} | | user CPU |")
        print(f"| &nbsp;&nbsp;{role} process: the kernel's | {cell(kernel1 - kernel0)} | | fork's page copies, exit |")
    total += last.servers - first.servers + last.grader - first.grader
    print(f"| &nbsp;&nbsp;the servers (forking) | {cell(last.servers - first.servers)} | | |")
    print(f"| &nbsp;&nbsp;the grader (runs, reports) | {cell(last.grader - first.grader)} | | this process |")
    print(f"| &nbsp;&nbsp;all of them | {cell(total)} | | |")


def by_exercise(work: Path, solutions: Path, learners: int) -> None:
    """What one more learner costs, for each exercise alone and for the whole course (``--by-exercise``)."""
    parts = {path.stem: [path.name] for path in sorted(solutions.glob("ex*.py"))}
    parts["the whole course"] = [name for names in parts.values() for name in names]
    for label, names in parts.items():
        cpu = {}
        for size in (1, learners):
            cls = work / f"by-{label.replace(' ', '-')}-{size}"
            for i in range(size):
                (cls / f"learner{i:02d}").mkdir(parents=True)
                for name in names:
                    shutil.copy(solutions / name, cls / f"learner{i:02d}" / name)
            cpu[size] = timed([PY, "-m", "grader", "batch", str(cls), "-o", str(cls) + "-out", "--workers", "1",
                               "--quiet", "--isolation", "none", "--lang", "en"]).cpu
        print(f"| &nbsp;&nbsp;one more learner: {label} | {(cpu[learners] - cpu[1]) / (learners - 1):.2f} | | "
              f"classes of {learners} and 1: {cpu[learners]:.2f} and {cpu[1]:.2f} CPU-s |")


if __name__ == "__main__":
    sys.exit(main())
