"""How fast is grading? Prints figures for docs/instructors.md ("Speed"); not a test.

    python benchmarks/bench_batch.py [--learners 30] [--repeats 3] [--device cpu]

Measures, on this machine:
  * seconds to ``python -c "import torch"`` (and a bare ``python -c pass``);
  * seconds to grade one full submission (solutions/) with ``grader grade``;
  * seconds per learner for a class (copies of solutions/, the correct styles, the stubs and
    solutions with one known mistake each) with ``grader batch --workers 1`` and ``--workers 2``,
    and ``--workers 2`` with ``--no-fork-server`` (every sandbox a fresh Python) and with
    ``--isolation none`` (no bubblewrap: what isolation costs, target <= 15% per learner);
  * where one grade's time goes: process start, imports, each exercise's checks (from the
    report's per-check ``seconds``), and the rest (the sandboxed child starting up).
Each step runs the real command line in a subprocess, as an instructor would. Besides wall
time it prints CPU time (user + sys of every process the step started, sandboxes included):
on a machine shared with other work, wall time grows with their load, CPU time hardly does.
The CPU time of processes inside bubblewrap's pid namespace does not reach us (their usage is
collected by the sandbox's init, not handed up), so compare CPU time only with ``--isolation none``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from targets import ROOT, Timed, median, timed  # noqa: E402 - after the path is set


def make_class(root: Path, size: int) -> Path:
    """``size`` learners: full solutions, the two correct styles, stubs, and one mistake each."""
    cls = root / "class"
    cls.mkdir()
    sources: list[tuple[str, Path, tuple[str, Path] | None]] = [
        ("solutions", ROOT / "solutions", None),
        ("lesson", ROOT / "tests" / "submissions" / "lesson_style", None),
        ("modern", ROOT / "tests" / "submissions" / "modern_style", None),
        ("stubs", ROOT / "exercises", None),
    ]
    mistakes = sorted((ROOT / "tests" / "submissions" / "mistakes").glob("*/*.py"))
    sources += [(f"{m.parent.name[:3]}-{m.stem}", ROOT / "solutions", (m.parent.name, m)) for m in mistakes]
    for i in range(size):
        name, base, mistake = sources[i % len(sources)]
        folder = cls / f"learner{i:03d}-{name}"
        shutil.copytree(base, folder, ignore=shutil.ignore_patterns("__pycache__"))
        if mistake is not None:
            shutil.copy(mistake[1], folder / f"{mistake[0]}.py")
    return cls


def batch(cls: Path, out: Path, workers: int, device: str, *, fork_server: bool = True,
          isolation: str = "auto") -> Timed:
    return timed([sys.executable, "-m", "grader", "batch", str(cls), "-o", str(out), "--workers", str(workers),
                  "--force", "--quiet", "--device", device, "--lang", "en", "--isolation", isolation,
                  *([] if fork_server else ["--no-fork-server"])])


def breakdown(report: dict[str, Any]) -> dict[str, float]:
    return {ex_id: sum(float(c.get("seconds", 0.0)) for c in ex["checks"]) for ex_id, ex in report["exercises"].items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda", "mps"))
    args = parser.parse_args()
    py = sys.executable

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start, Python "
          f"{sys.version.split()[0]}")
    bare = median(args.repeats, [py, "-c", "pass"]).wall
    torch_runs = [timed([py, "-c", "import torch"]) for _ in range(args.repeats)]
    torch_s = statistics.median(r.wall for r in torch_runs)
    torch_cpu = statistics.median(r.cpu for r in torch_runs)
    cli_s = median(args.repeats, [py, "-c", "import grader.commands.cli"]).wall
    judge_s = median(args.repeats, [py, "-c", "import grader.judge.session, grader.judge.api"]).wall
    learner_s = median(args.repeats, [py, "-c", "import grader.learner.runner"]).wall
    print(f"python -c pass:                 {bare:6.2f} s")
    torch_walls = ", ".join(f"{r.wall:.2f}" for r in torch_runs)
    print(f"python -c 'import torch':       {torch_s:6.2f} s   (runs: {torch_walls}; CPU {torch_cpu:.2f} s)")
    print(f"python -c 'import grader.commands.cli': {cli_s:6.2f} s   (the grader's own process)")
    print(f"python -c 'import grader.judge.session': {judge_s:6.2f} s   (the judge: torch, pytest, check support)")
    print(f"python -c 'import grader.learner.runner':{learner_s:6.2f} s   (the learner process: torch, device layer)")

    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        work = Path(tmp)
        submission = work / "solutions"
        shutil.copytree(ROOT / "solutions", submission, ignore=shutil.ignore_patterns("__pycache__"))
        report_path = work / "report.yaml"
        median_run = {}
        for isolation in ("auto", "none"):
            runs = []  # (wall, cpu, report) of each run
            for _ in range(args.repeats):
                run = timed([py, "-m", "grader", "grade", str(submission), "-o", str(report_path), "--quiet",
                             "--device", args.device, "--isolation", isolation])
                runs.append((run.wall, run.cpu, yaml.safe_load(report_path.read_text(encoding="utf-8"))))
            runs.sort(key=lambda run: run[0])
            median_run[isolation] = runs[len(runs) // 2]
            mode = median_run[isolation][2]["isolation"]["mode"]
            print(f"grade one full submission, --isolation {isolation} ({mode}): {median_run[isolation][0]:6.2f} s   "
                  f"(runs: {', '.join(f'{r[0]:.2f}' for r in runs)}; CPU {median_run[isolation][1]:.2f} s; "
                  f"score {median_run[isolation][2]['score']:g})")
        one, one_cpu, report = median_run["auto"]
        print(f"  = {one / torch_s:.2f} x import torch wall, {one_cpu / torch_cpu:.2f} x in CPU  (target <= 3)")
        checks = breakdown(report)
        inside = float(report["grading_seconds"])
        print("  where the time goes (the median run):")
        print(f"    grader process: start, imports, load, write   {one - inside:6.2f} s")
        print(f"    sandboxed child: start, imports, collection  {inside - sum(checks.values()):6.2f} s   "
              f"(a bare import torch: {torch_s - bare:.2f} s)")
        for ex_id, seconds in checks.items():
            print(f"    {ex_id} checks                                   {seconds:6.2f} s")

        cls = make_class(work, args.learners)
        walls = {}
        for workers, fork_server, isolation in ((1, True, "auto"), (2, True, "auto"), (2, True, "none"),
                                                (2, False, "auto")):
            out = work / f"out-{workers}-{fork_server}-{isolation}"
            run = batch(cls, out, workers, args.device, fork_server=fork_server, isolation=isolation)
            wall, cpu = run.wall, run.cpu
            walls[workers, fork_server, isolation] = wall
            graded = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in out.glob("learner*.yaml")]
            mean_grade = statistics.fmean(float(r["grading_seconds"]) for r in graded)
            mean_checks = statistics.fmean(sum(breakdown(r).values()) for r in graded)
            label = (f"--workers {workers}" + ("" if fork_server else ", --no-fork-server")
                     + ("" if isolation == "auto" else f", --isolation {isolation}"))
            print(f"class of {args.learners}, {label}:    {wall:6.1f} s wall, "
                  f"{wall / args.learners:5.2f} s per learner, {args.learners / wall * 60:5.1f} learners/min")
            print(f"    per learner: grade {mean_grade:.2f} s, of which checks {mean_checks:.2f} s; "
                  f"CPU {cpu / args.learners:.2f} s; {cpu / wall:.2f} cores busy")
        print(f"  2 workers / 1 worker throughput: {walls[1, True, 'auto'] / walls[2, True, 'auto']:.2f} x  "
              "(target >= 1.8)")
        print(f"  fork server / exec'd sandboxes, 2 workers: "
              f"{walls[2, False, 'auto'] / walls[2, True, 'auto']:.2f} x")
        cost = walls[2, True, "auto"] / walls[2, True, "none"] - 1
        print(f"  isolation's cost per learner, 2 workers: {100 * cost:+.1f} %  (target <= 15 %)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
