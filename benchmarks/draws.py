"""A correct submission never loses a point to the problems its grading draws.

    python benchmarks/draws.py [--draws 20] [--styles all|solutions] [--first-seed 1] [--isolation auto|none]
                               [--device auto|cuda|mps|cpu] [--workers 1] [--seed N ...] [--style NAME ...]

Every grading draws its problems from a secret seed (grader/reference/draws.py: matrix sizes, values,
chunk size, batch, learning rate, weights and data). This grades each correct style
(tests/submissions/catalog.py) with seeds ``--first-seed`` .. ``--first-seed + --draws - 1`` — the
same seeds for every style, its processes forked from warm servers as in ``grader batch`` — and
prints the points each style lost and the seeds that cost them (``grader grade --seed SEED`` regrades
one). The count must be zero. A rule that compares values is right for most draws and wrong for a
few: grading seed 175871067181834 made the reference solution's float16 losses land bit for bit on
FP32's, and the AMP checks took it for a forgery (grader/checks/ex5_amp/workload.py ``AMP_STEPS``).
The test suite grades a handful of draws; this grades as many as there is time for. ``--seed`` (repeated)
grades given seeds instead, ``--style`` (repeated) given styles only: the draws a GPU run lost, again.

On a GPU (``--device cuda --workers 8``) it is the run that finds what only a real device's rounding
does with some draws: on an H200, 3 correct gradings in ~350 lost the back-off check, each on a draw
whose problem put a ReLU input within 1e-8 of its kink (docs/gpu-validation.md) — on a CPU the
stand-ins compute what the judge computes, and no draw shows it. Each worker gets ``grader batch``'s
share of the cores and of the GPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.course import load_course  # noqa: E402
from grader.grading import grade  # noqa: E402
from grader.run.isolation import NONE, probe  # noqa: E402
from grader.run.launch import ForkLauncher  # noqa: E402
from grader.run.share import machine_share  # noqa: E402
from grader.score.results import Report  # noqa: E402
from tests.submissions.catalog import CORRECT_STYLES  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20, help="grading seeds per style")
    parser.add_argument("--styles", choices=("all", "solutions"), default="all")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--seed", type=int, action="append", default=[],
                        help="grade these grading seeds instead (repeat the option); e.g. those a GPU run lost")
    parser.add_argument("--style", action="append", default=[], choices=sorted(CORRECT_STYLES),
                        metavar="STYLE", help="only these correct styles (repeat the option)")
    parser.add_argument("--isolation", choices=("auto", "none"), default="none")
    parser.add_argument("--device", choices=("auto", "cuda", "mps", "cpu"), default="auto")
    parser.add_argument("--workers", type=int, default=1, help="gradings at once, as grader batch --workers")
    args = parser.parse_args()
    isolation = probe() if args.isolation == "auto" else NONE
    styles = CORRECT_STYLES if args.styles == "all" else {"solutions": CORRECT_STYLES["solutions"]}
    if args.style:
        styles = {name: CORRECT_STYLES[name] for name in args.style}
    seeds = args.seed or list(range(args.first_seed, args.first_seed + args.draws))
    course = load_course()
    work = Path(tempfile.mkdtemp(prefix="draws-"))
    lost_total = 0.0
    started = time.monotonic()
    print(f"{len(styles)} styles x {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}); isolation: {isolation.mode}; "
          f"device: {args.device}; {args.workers} at once")
    try:
        for name, source in styles.items():
            shutil.copytree(source, work / name)
        share = machine_share(max(args.workers, 1), os.environ)
        with ForkLauncher(share, isolation) as launcher, ThreadPoolExecutor(max(args.workers, 1)) as pool:
            reports = {(name, seed): pool.submit(grade, work / name, course, device=args.device, lang="en",
                                                 launcher=launcher, seed=seed)
                       for name in styles for seed in seeds}
            for name in styles:
                lost, costly = 0.0, []
                for seed in seeds:
                    report: Report = reports[name, seed].result()
                    if report.score < report.max_score:
                        lost += report.max_score - report.score
                        failing = sorted((c.id, c.message) for ex in report.exercises for c in ex.checks
                                         if c.status != "passed")
                        costly.append(f"{seed} ({', '.join(check for check, _ in failing)}: {failing[0][1][:160]})")
                lost_total += lost
                print(f"{name:13s} lost {lost:5.1f} points over {len(seeds)} draws; seeds: {'; '.join(costly) or '-'}",
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"lost points in total: {lost_total:g} ({time.monotonic() - started:.0f} s)")
    return 0 if lost_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
