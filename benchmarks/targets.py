"""Issue 24's five targets, measured side by side in one run; prints figures, asserts nothing.

    python benchmarks/targets.py [--repeats 3] [--learners 8]

1. ``grader grade solutions`` <= 1.5 x a bare ``python -c "import torch"`` (wall: the median ratio of
   ``--repeats`` pairs, each an import and a grading one after the other; CPU beside it), and under
   it the floor no grading can go below: the learner process's own imports (torch and the device
   layer) before any check runs; and, not a target, the same pairs on one core (``taskset``);
2. a learner of a ``grader batch --workers 2`` class (isolation and the judge on) <= 0.5
   import-torch core-seconds (the batch's wall x the cores it was given / learners, over the CPU
   seconds of the ``import torch`` run just before and after it: the median of ``--repeats``
   rounds), the servers' start (two processes importing torch) shared by the class; and under it
   a learner past that start, what each more learner of a large class costs: the same class
   against a class of two in the same round, the difference over the learners it adds; and what the
   class pays once (the class of two less its learners' share), with the figure a learner past the start
   must reach for the class's own to meet the target; and, computed from those two (not measured), a
   learner's figure in a class of 100 and of 500 (the issue's class "graded over lunch");
3. a learner whose ``time_matmul`` never returns <= 40 s, the slower of two: a plain endless loop (the learner
   process's own limit stops it) and one whose bare ``except`` swallows that limit (the judge gives up on the
   call past the check's time, and the grader ends the process);
4. a notebook with demo cells (tests/notebooks/learners/colab_lesson_demos.ipynb) <= 1.5 x the same
   functions as a ``.py`` (its definitions only, cut out of its cells here); beside it, not a target,
   the lesson's own N = 10000 speed test pasted into a notebook (kaggle_saved_version.ipynb), whose
   CPU matmul of 2 TFLOP the learner process runs in blocks (grader/learner/longcalls.py);
5. no single check >= 0.5 s on the reference solutions (the report's per-check ``seconds``).

Wall time on a machine shared with other work grows with their load; CPU time hardly does, so
each line prints both where it can. The CPU time of processes inside bubblewrap's pid namespace
does not reach this process (their init collects it), so CPU figures come from ``--isolation none``
runs of the same command. The load average is printed at the start and the end: read the wall
ratios against it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
# As a user's machine runs the grader: bytecode written (a shell that sets PYTHONDONTWRITEBYTECODE, as this
# project's machine does, would time Python compiling the grader's own modules at every start).
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(ROOT)}
PY = sys.executable
NOTEBOOK = ROOT / "tests" / "notebooks" / "learners" / "colab_lesson_demos.ipynb"
CLASS_SIZES = (100, 500)  # what target 2 reads in larger classes (computed from a learner past the start and the once)
PAIR = 2  # the small class that target 2's larger one is compared with
HANGS = {
    "plain": '''

def time_matmul(n, device, repeats=5):  # never returns
    while True:
        pass
''',
    "swallows its limit": '''

def time_matmul(n, device, repeats=5):  # never returns, whatever interrupts it
    while True:
        try:
            while True:
                pass
        except:  # noqa: E722
            pass
''',
}


@dataclass(frozen=True)
class Timed:
    wall: float
    cpu: float  # user + sys of every process it waited for


def timed(cmd: Sequence[str]) -> Timed:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return Timed(wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def median(repeats: int, cmd: Sequence[str]) -> Timed:
    runs = [timed(cmd) for _ in range(repeats)]
    return Timed(statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs))


def paired(repeats: int, command: Sequence[str], prefix: Sequence[str] = ()) -> tuple[Timed, Timed, list[float]]:
    """``repeats`` pairs, each a bare ``import torch`` and then ``command`` (both behind ``prefix``): each side's
    medians and the pairs' own ratios, sorted. This machine's speed drifts by a third within minutes, and a
    ratio of two medians taken minutes apart drifts with it."""
    pairs = [(timed([*prefix, PY, "-c", "import torch"]), timed([*prefix, *command])) for _ in range(repeats)]
    first = Timed(statistics.median(t.wall for t, _ in pairs), statistics.median(t.cpu for t, _ in pairs))
    second = Timed(statistics.median(g.wall for _, g in pairs), statistics.median(g.cpu for _, g in pairs))
    return first, second, sorted(g.wall / t.wall for t, g in pairs)


def grade(submission: Path, out: Path, *extra: str) -> list[str]:
    return [PY, "-m", "grader", "grade", str(submission), "-o", str(out), "--quiet", "--lang", "en", *extra]


def definitions_only(notebook: Path) -> str:
    """The notebook's imports, functions, classes and capitalised names (UPPER_CASE constants, aliases
    such as ``OOMError = torch.OutOfMemoryError``), as one .py: what its exercises define, without a demo
    cell."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    kept: list[str] = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        try:
            tree = ast.parse(text)
        except SyntaxError:  # magics, shell lines
            continue
        for node in tree.body:
            constant = isinstance(node, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id[:1].isupper() for t in node.targets)
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) or constant:
                kept.append(ast.get_source_segment(text, node) or "")
    return "\n\n".join(kept) + "\n"


def line(label: str, value: float, target: float, unit: str, detail: str) -> None:
    verdict = "met" if value <= target else "NOT met"
    print(f"{label:<46} {value:7.2f}{unit:<3} target <= {target:g}{unit:<3} {verdict:<8} {detail}")


def main() -> int:  # noqa: PLR0914 - one run, many figures
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learners", type=int, default=8)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"machine: {cores} CPUs, load average {os.getloadavg()[0]:.2f} at start, Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as tmp:
        work = Path(tmp)
        solutions = work / "solutions"
        shutil.copytree(ROOT / "solutions", solutions, ignore=shutil.ignore_patterns("__pycache__"))
        report_path = work / "solutions.yaml"

        # Target 1 in pairs, an `import torch` and then a grading, each pair's own ratio (``paired``).
        torch, graded, ratios = paired(args.repeats, grade(solutions, report_path))
        print(f"python -c 'import torch': {torch.wall:.2f} s wall, {torch.cpu:.2f} s CPU")
        report: dict[str, Any] = yaml.safe_load(report_path.read_text(encoding="utf-8"))
        unisolated = median(args.repeats, grade(solutions, work / "none.yaml", "--isolation", "none"))
        line("1. grader grade solutions / import torch", statistics.median(ratios), 1.5, "x",
             f"(median of {len(ratios)} pairs, {ratios[0]:.2f}-{ratios[-1]:.2f}; {graded.wall:.2f} s, score "
             f"{report['score']:g}; CPU {unisolated.cpu:.2f} s = {unisolated.cpu / torch.cpu:.2f} x, --isolation none)")
        # What no grading can go under: its learner process's imports (torch and the device layer;
        # torch._dynamo is deferred, grader/learner/deferred.py), before any check runs.
        floor = median(args.repeats, [PY, "-c", "import grader.learner.__main__, grader.learner.runner"])
        print(f"   floor: the learner process's own imports (torch, the device layer) "
              f"{floor.wall:.2f} s = {floor.wall / torch.wall:.2f} x, before any check runs")
        # Not a target: the same pair pinned to one core (a Slurm task of one CPU, a small container), where the
        # grading's two imports of torch (its judge's and its learner process's) run one after the other.
        pinned = ["taskset", "-c", str(min(os.sched_getaffinity(0)))]
        one_torch, one_graded, one_ratios = paired(args.repeats, grade(solutions, report_path), pinned)
        print(f"   on one core (taskset, not a target): {statistics.median(one_ratios):.2f} x (median of "
              f"{len(one_ratios)} pairs, {one_ratios[0]:.2f}-{one_ratios[-1]:.2f}; {one_graded.wall:.2f} s against "
              f"{one_torch.wall:.2f} s): its two imports of torch one after the other")

        cls, pair = work / "class", work / "pair"
        for i in range(args.learners):
            shutil.copytree(solutions, cls / f"learner{i:02d}")
        for i in range(PAIR):
            shutil.copytree(solutions, pair / f"learner{i:02d}")

        def batch(learners: Path) -> list[str]:
            return [PY, "-m", "grader", "batch", str(learners), "--workers", "2", "--force", "--quiet", "--lang", "en"]

        # Target 2 in rounds, as target 1 in pairs: each round's batches between two `import torch`s,
        # divided by their mean (an import measured minutes before, at the start, drifted with the machine).
        rounds: list[tuple[float, float, float | None]] = []  # (import CPU s, the class's wall, a pair's wall)
        for r in range(args.repeats):
            before = timed([PY, "-c", "import torch"])
            isolated = timed([*batch(cls), "-o", str(work / f"out-auto-{r}")])
            two = timed([*batch(pair), "-o", str(work / f"out-pair-{r}")]) if args.learners > PAIR else None
            after = timed([PY, "-c", "import torch"])
            rounds.append(((before.cpu + after.cpu) / 2, isolated.wall, two.wall if two else None))
        bare = timed([*batch(cls), "-o", str(work / "out-none"), "--isolation", "none"])
        cores_given = min(cores, 2)
        per = sorted((wall * cores_given / args.learners / imp, wall, imp) for imp, wall, _ in rounds)
        ratio, wall, imp = per[len(per) // 2]
        line("2. batch learner, import-torch core-seconds", ratio, 0.5, "",
             f"(median of {len(per)} rounds, {per[0][0]:.2f}-{per[-1][0]:.2f}; {wall:.1f} s for {args.learners} on "
             f"2 workers = {wall * cores_given / args.learners:.2f} core-s a learner, its round's import "
             f"{imp:.2f} CPU-s; CPU {bare.cpu / args.learners:.2f} s a learner = "
             f"{bare.cpu / args.learners / torch.cpu:.2f}, --isolation none)")
        if args.learners > PAIR:
            more = sorted(((wall - two_wall) * cores_given / (args.learners - PAIR) / imp, two_wall, imp)
                          for imp, wall, two_wall in rounds if two_wall is not None)
            past, two_wall, imp = more[len(more) // 2]
            print(f"   past the servers' start: a class of {PAIR} took {two_wall:.1f} s; each of the "
                  f"{args.learners - PAIR} more learners {past:.2f} import-torch core-seconds (median of "
                  f"{len(more)} rounds, {more[0][0]:.2f}-{more[-1][0]:.2f}; a class of hundreds)")
            # What a class pays once, whatever its size: the servers' start (two processes importing torch side
            # by side) and the grader's own start and end — the class of two less its learners.
            once = two_wall * cores_given - PAIR * past * imp
            share = once / args.learners / imp
            print(f"   paid once a class: {once:.1f} core-s, {share:.2f} of each learner's figure in a class of "
                  f"{args.learners}, which meets 0.5 when a learner past the start costs <= {0.5 - share:.2f}")
            # The class of 500 "over lunch", and one between: the two measured parts, not a measurement.
            sizes = "; ".join(f"{n}: {past + once / n / imp:.2f}" for n in CLASS_SIZES)
            print(f"   so a batch learner in a class of {sizes} (computed from the two lines above)")

        hung: dict[str, tuple[float, float, float]] = {}  # how it hangs -> wall, score, learner clock
        for i, (how, code) in enumerate(HANGS.items()):
            hangs = work / f"hangs{i}"
            shutil.copytree(solutions, hangs)
            with open(hangs / "ex2_timing.py", "a", encoding="utf-8") as file:
                file.write(code)
            wall = timed(grade(hangs, work / f"hangs{i}.yaml")).wall
            ended = yaml.safe_load((work / f"hangs{i}.yaml").read_text(encoding="utf-8"))
            hung[how] = (wall, ended["score"], ended["learner_seconds"])
        line("3. a learner whose time_matmul never returns", max(wall for wall, _, _ in hung.values()), 40, "s",
             "(the slower of " + "; ".join(f"{how}: {wall:.1f} s, score {score:g}, learner clock {clock:g} s"
                                            for how, (wall, score, clock) in hung.items()) + ")")

        defs = work / "colab_lesson_demos.py"
        defs.write_text(definitions_only(NOTEBOOK), encoding="utf-8")
        notebook = median(args.repeats, grade(NOTEBOOK, work / "nb.yaml"))
        plain = median(args.repeats, grade(defs, work / "py.yaml"))
        scores = [yaml.safe_load((work / name).read_text(encoding="utf-8"))["score"] for name in ("nb.yaml", "py.yaml")]
        # The demo cells run in the learner process: its CPU counts only outside bubblewrap.
        notebook_cpu = median(args.repeats, grade(NOTEBOOK, work / "nb-none.yaml", "--isolation", "none")).cpu
        plain_cpu = median(args.repeats, grade(defs, work / "py-none.yaml", "--isolation", "none")).cpu
        line("4. notebook with demo cells / its functions", notebook.wall / plain.wall, 1.5, "x",
             f"({notebook.wall:.1f} s vs {plain.wall:.1f} s; scores {scores[0]:g}, {scores[1]:g}; CPU "
             f"{notebook_cpu:.1f} vs {plain_cpu:.1f} s = {notebook_cpu / plain_cpu:.2f} x, --isolation none)")

        # Not the target's notebook, but what learners hand in: the lesson's own speed test pasted as it is,
        # a CPU matmul of N = 10000. In one C call it cost the course's cell limit, the grace and a restart;
        # in blocks, its cell stops once their pace shows it cannot end in time (docs/performance.md).
        pasted = ROOT / "tests" / "notebooks" / "learners" / "kaggle_saved_version.ipynb"
        pasted_defs = work / "kaggle_saved_version.py"
        pasted_defs.write_text(definitions_only(pasted), encoding="utf-8")
        pasted_nb = timed(grade(pasted, work / "pasted-nb.yaml"))
        pasted_py = timed(grade(pasted_defs, work / "pasted.yaml"))
        pasted_scores = [yaml.safe_load((work / name).read_text(encoding="utf-8"))["score"]
                         for name in ("pasted-nb.yaml", "pasted.yaml")]
        print(f"   the lesson's own N = 10000 speed test pasted in ({pasted.name}, once): {pasted_nb.wall:.1f} s vs "
              f"{pasted_py.wall:.1f} s = {pasted_nb.wall / pasted_py.wall:.2f} x (scores {pasted_scores[0]:g}, "
              f"{pasted_scores[1]:g})")

        seconds = sorted(((float(c.get("seconds") or 0.0), c["id"]) for ex in report["exercises"].values()
                          for c in ex["checks"]), reverse=True)
        slow = ", ".join(f"{check} {s:.2f}" for s, check in seconds[:5])
        line("5. slowest check on the reference solutions", seconds[0][0], 0.5, "s", f"({slow})")
        over = [check for s, check in seconds if s >= 0.5]
        print(f"   checks >= 0.5 s: {len(over)} of {len(seconds)}; all checks: {sum(s for s, _ in seconds):.2f} s")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
