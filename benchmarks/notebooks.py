"""How long do real notebooks take to grade? Prints one line per catalog notebook; not a test.

    python benchmarks/notebooks.py [--repeats 1]

Grades every learner file of tests/notebooks/learners/ (Colab and Kaggle saves, with GPU demos,
the lesson's N = 10000 speed test, input(), ...) with ``grader grade``, as an instructor would,
and prints the wall time, the report's own grading time, the cells stopped and the score. The
goal (issue: "a notebook whose top level would take minutes on a CPU is graded in well under a
minute") rests on the limits in course.yaml: 10 s a cell, 60 s the whole top level.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.notebooks.catalog import CASES  # noqa: E402 - after the path is set


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"{'file':<30} {'wall s':>7} {'graded s':>8}  score  stopped cells")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            for _ in range(args.repeats):
                out = Path(tmp) / "report.yaml"
                started = time.monotonic()
                subprocess.run([sys.executable, "-m", "grader", "grade", str(case.path), "-o", str(out), "--quiet"],
                               env=env, check=True, capture_output=True)
                wall = time.monotonic() - started
                worst = max(worst, wall)
                report = yaml.safe_load(out.read_text(encoding="utf-8"))
                kinds = Counter(stop["kind"] for stop in report["top_level"])
                stopped = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "-"
                graded = report["grading_seconds"]
                print(f"{case.file:<30} {wall:7.1f} {graded:8.1f}  {report['score']:5.1f}  {stopped}")
    print(f"slowest: {worst:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
