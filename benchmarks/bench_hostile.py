"""What hostile uploads cost the grader (issue 23): its own CPU and memory, and its judge's.

    python benchmarks/bench_hostile.py [--isolation auto|none]

Grades, with ``grader grade``, the attackers of tests/test_hostile_bytes.py one at a time and
prints for each: the wall time, the grader process's own CPU seconds and peak memory, and the peak
memory of its children (the judge, the learner process). Before issue 23: four 50 MB top-level
labels cost the grader's process 21 s of CPU (its line buffer re-split everything it held on each
read); a 60-byte frame grew the judge to 1.4 GiB; a 300 MB notebook took the grader to 1.5 GiB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import folder_with  # noqa: E402
from tests.test_hostile_bytes import FRAMES, LABELS  # noqa: E402

MiB = 1024 * 1024
WRAPPER = """
import resource, runpy, sys
sys.argv = ["grader", *sys.argv[1:]]
try:
    runpy.run_module("grader", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print("FIGURES", me.ru_utime + me.ru_stime, me.ru_maxrss, kids.ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def measure(submission: Path, out: Path, isolation: str) -> str:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, "grade", str(submission), "-o", str(out), "--quiet",
                           "--isolation", isolation], capture_output=True, text=True, check=False, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.monotonic() - started
    figures = next((line.split() for line in proc.stderr.splitlines() if line.startswith("FIGURES")), None)
    if figures is None:
        return f"failed (exit {proc.returncode}): {proc.stderr[-300:]}"
    cpu, own, kids = float(figures[1]), int(figures[2]) * 1024, int(figures[3]) * 1024
    return (f"{wall:6.1f} s wall, grader {cpu:5.2f} s CPU and {own / MiB:6.0f} MiB peak, "
            f"children {kids / MiB:6.0f} MiB peak (exit {proc.returncode})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--isolation", choices=("auto", "none"), default="auto")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        root = Path(tmp)
        labels = root / "labels.py"
        labels.write_text(LABELS, encoding="utf-8")
        frames = folder_with(root, "frames", FRAMES)
        huge = root / "huge.ipynb"
        with open(huge, "wb") as out:
            out.truncate(300 * MiB)
        for name, submission in (("four 50 MB labels", labels), ("hostile frames", frames),
                                 ("300 MB notebook", huge)):
            print(f"{name:>18}: {measure(submission, root / 'report.yaml', args.isolation)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
