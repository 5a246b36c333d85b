"""Where one ``grader grade`` and one batch learner spend their time; prints a Markdown table.

    python benchmarks/profile_grade.py [--repeats 3] [--learners 6] [--by-exercise 12]

Each figure is CPU seconds (user + sys of the processes the step started, measured by this
process), the figure a busy machine hardly changes; wall seconds beside it. Every process here runs
with ``--isolation none``: the CPU time of processes inside bubblewrap's pid namespace never reaches
this process. Rows:

* the imports each process pays when it is exec'd: the grader's own (``grader.commands.cli``), the
  judge's (torch, pytest, the checks' support), the learner process's (torch, the device layer), and
  ``torch._dynamo``, which the first ``torch.optim`` call of each process imports (sympy, mpmath);
* one ``grader grade solutions`` (exec'd judge and learner process), and its checks' own seconds
  from the report, exercise by exercise (wall time inside the judge);
* one learner of a ``grader batch --workers 1`` class (processes forked from warm servers);
* with ``--by-exercise N``: what one more learner costs, exercise by exercise — the CPU of a class of
  N learners who each handed in only that exercise's reference solution, less a class of one, over
  N − 1 (the servers' start cancels out; each figure still holds the per-learner fixed part:
  two forks, the judge's pytest session, the protocol) — and the same for the whole course.
What is left of a grading once the imports and the checks are counted is starting the processes,
the sandbox, the protocol and ending the run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import PY, ROOT, Timed, median, timed  # noqa: E402 - after the path is set

IMPORTS = {
    "bare `python -c pass`": "pass",
    "`import torch`": "import torch",
    "grader's own process (`grader.commands.cli`)": "import grader.commands.cli",
    "judge's imports (torch, pytest, checks' support)":
        "import grader.judge.__main__, grader.judge.api, pytest, pytest_timeout",
    "learner process's imports (torch, device layer)": "import grader.learner.__main__, grader.learner.runner",
    "`import torch, torch._dynamo` (first optimizer call)": "import torch, torch._dynamo",
}


def row(label: str, t: Timed, note: str = "") -> None:
    print(f"| {label} | {t.cpu:.2f} | {t.wall:.2f} | {note} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learners", type=int, default=6)
    parser.add_argument("--by-exercise", type=int, default=0, metavar="N",
                        help="also each exercise's cost a learner, from classes of N and of 1 (N >= 2)")
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
        if args.by_exercise >= 2:
            by_exercise(work, solutions, args.by_exercise)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    return 0


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
