"""What a training step costs on the stand-ins in CPU instructions (callgrind), a figure no other
process on the machine changes; prints a Markdown table.

    python benchmarks/standin_instructions.py [--rounds 3] [--root OTHER_CHECKOUT ...]

``standin_cost.py`` times the same trainings in CPU milliseconds, which move by 10-30 % from one run
to the next on a shared 2-core machine: too much to see a change of a few per cent in the stand-in's
own code. Here each checkout's trainings run under valgrind's callgrind (``apt-get install valgrind``;
~50 times slower, about 4 minutes a checkout), twice: a warm-up round only, and the warm-up then
``--rounds`` more; the difference over the trainings is what one more training costs, without
Python's and torch's start. A round is ``standin_cost.py``'s workload, that checkout's own: ex5's
reference solution (solutions/ex5_amp.py, ``train_steps``, 4 steps of the quick checks' problem) in FP32,
FP16 (autocast + GradScaler) and BF16 (autocast), on a cuda and on an mps stand-in, each in a session of
its own as a check opens it. The counts are not exactly repeatable (the warm-up run alone differs by
tens of millions between runs), so one round is noisy: measured, 1.3-2.6 M a training off the same
commits' three-round figures (95.2, 95.5); two rounds are too, more than that once: one commit read 77.8 and
80.3 M in two two-round runs, and another 94.5 in one where three-round runs read 82.4 and 82.9 (2026-12-06).
Quote three rounds for a change of a few per cent. After the warm-up the
process freezes what it holds (``gc.freeze()``), as a learner process does before any learner code.

``--root`` (repeatable) measures other checkouts of this project beside this one — a commit before a
change, checked out with ``git worktree add /tmp/before HEAD~1`` — each with its own code and its
own reference solution; the two runs of each checkout go side by side on two cores.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("cuda", "mps")

# What runs under callgrind: the measured checkout's own standin_cost.py workload (its problem, its
# reference solution, its stand-in sessions), with that checkout's ``grader`` first on the path.
INNER = r'''
import gc, sys
root, rounds = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, root + "/benchmarks")
import torch
import standin_cost as sc
train = sc._solution().train_steps
torch.set_num_threads(1)
def one_round():
    for kind in %(kinds)r:
        for dtype in sc.DTYPES.values():
            model, inputs, targets = sc.ex5_problem(*sc.PROBLEM)
            with sc._standin(kind) as device:
                train(model, inputs, targets, device, steps=sc.STEPS, amp_dtype=dtype)
one_round()
gc.collect()
gc.freeze()
for _ in range(rounds):
    one_round()
'''


def _instructions(root: Path, rounds: int) -> int:
    """Instructions of one Python running the warm-up and ``rounds`` rounds in ``root``."""
    code = INNER % {"kinds": KINDS}
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                           code, str(root), str(rounds)], capture_output=True, text=True, cwd=root,
                          env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"callgrind failed in {root}:\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--root", type=Path, action="append", default=[],
                        help="another checkout of this project to measure beside this one")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind); standin_cost.py times the same trainings",
              file=sys.stderr)
        return 2
    from standin_cost import DTYPES, STEPS  # (imports torch: after valgrind was found)

    roots = [*[r.resolve() for r in args.root], ROOT]
    trainings = args.rounds * len(KINDS) * len(DTYPES)
    print(f"one {STEPS}-step training of ex5's small problem on a stand-in, millions of instructions (callgrind; "
          f"{args.rounds} rounds of {len(KINDS) * len(DTYPES)} trainings: {', '.join(KINDS)} x {', '.join(DTYPES)})\n")
    print("| checkout | instructions a training (M) | warm-up run (M) |")
    print("|---|---:|---:|")
    for root in roots:
        with ThreadPoolExecutor(2) as pool:
            warm, more = pool.map(lambda n, r=root: _instructions(r, n), (0, args.rounds))
        label = "this checkout" if root == ROOT else str(root)
        print(f"| {label} | {(more - warm) / trainings / 1e6:.1f} | {warm / 1e6:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
