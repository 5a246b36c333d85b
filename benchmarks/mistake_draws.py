"""Every mistake keeps its verdict and its message whatever the grading draws.

    python benchmarks/mistake_draws.py [--draws 8] [--first-seed 1] [--workers 2] [--mistake NAME ...]

tests/test_mistakes.py grades each one-mistake file of the catalog (tests/submissions/catalog.py) once,
on whatever secret seed that run drew, and asserts it loses exactly the checks its header names, the
first with the message it names. A check whose message for a mistake depends on the draw makes that
test fail on a few draws in a hundred or a thousand: idioms/ex4_oom/loss_divided_by_num_micro_batches
got the loss's message on 597 draws in 600 and the weights' on 3 (its returned loss then within the
loss's tolerance), until the check read the weights first. This grades each mistake with seeds
``--first-seed`` .. ``--first-seed + --draws - 1``, its processes forked from warm servers, and prints
each grading that differs from the header: its seed regrades it (``grader grade --seed SEED``). The
count must be zero.
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
from grader.run.isolation import NONE  # noqa: E402
from grader.run.launch import ForkLauncher  # noqa: E402
from grader.run.share import machine_share  # noqa: E402
from grader.score.results import Report  # noqa: E402
from tests.submissions.catalog import Mistake, mistakes  # noqa: E402


def off(mistake: Mistake, report: Report) -> str:
    """How the grading differs from the mistake's header ("" when it does not)."""
    exercise = next(ex for ex in report.exercises if ex.id == mistake.exercise)
    lost = sorted(c.id for c in exercise.checks if c.status != "passed")
    if lost != sorted(mistake.fails):
        return f"lost {', '.join(lost) or 'nothing'}"
    message = next(c.message for c in exercise.checks if c.id == mistake.fails[0])
    return "" if mistake.message_prefix() in message else f"{mistake.fails[0]}: {' '.join(message.split())[:160]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=8, help="grading seeds per mistake")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="gradings at once, as grader batch --workers")
    parser.add_argument("--mistake", action="append", default=[], metavar="NAME",
                        help="only these mistakes (catalog names: idioms/ex4_oom/retries_on_any_runtime_error)")
    args = parser.parse_args()
    chosen = [m for m in mistakes() if not args.mistake or m.name in args.mistake]
    seeds = range(args.first_seed, args.first_seed + args.draws)
    course = load_course()
    work = Path(tempfile.mkdtemp(prefix="mistake-draws-"))
    started = time.monotonic()
    print(f"{len(chosen)} mistakes x {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}); {args.workers} at once")
    differing = 0
    try:
        for mistake in chosen:
            folder = work / mistake.name.replace("/", "__")
            folder.mkdir()
            shutil.copy(mistake.path, folder / f"{mistake.module}.py")
        with ForkLauncher(machine_share(max(args.workers, 1), os.environ), NONE) as launcher, \
                ThreadPoolExecutor(max(args.workers, 1)) as pool:
            reports = {(m.name, seed): (m, pool.submit(grade, work / m.name.replace("/", "__"), course, lang="en",
                                                       launcher=launcher, seed=seed))
                       for m in chosen for seed in seeds}
            for (name, seed), (mistake, future) in reports.items():
                how = off(mistake, future.result())
                if how:
                    differing += 1
                    print(f"{name} seed {seed}: {how}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"gradings that differ from their header: {differing} of {len(reports)} ({time.monotonic() - started:.0f} s)")
    return 0 if differing == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
