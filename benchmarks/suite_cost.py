"""Where the test suite's time goes, file by file (issue 24: the suite under 6 minutes on 2 cores).

    python benchmarks/suite_cost.py [--workers 2] [--top 15] [PYTEST_ARGS ...]

Runs ``pytest -n WORKERS --durations=0`` (the README's test command, every duration kept) and prints,
for each test file, its tests, the seconds its tests and fixtures took (test-seconds: the workers run
side by side, so the wall time is about their sum over the workers), the share in fixtures (a fixture
that grades a catalogue once shows up as one test's setup) and its slowest item. Then the wall time,
the machine's load and the total. Nothing is asserted: a figure to compare before and after a change,
read with the load beside it (this project's 2-core machine moves by 10 % between identical runs).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DURATION = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S+?)::(\S+)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (README: 2)")
    parser.add_argument("--top", type=int, default=15, help="files to list one by one")
    args, pytest_args = parser.parse_known_args()
    command = [sys.executable, "-m", "pytest", "-n", str(args.workers), "-q", "-p", "no:cacheprovider",
               "--durations=0", "--durations-min=0", *pytest_args]
    load = os.getloadavg()[0]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    seconds: dict[str, float] = collections.defaultdict(float)
    setup: dict[str, float] = collections.defaultdict(float)
    tests: dict[str, set[str]] = collections.defaultdict(set)
    slowest: dict[str, tuple[float, str]] = {}
    for line in proc.stdout.splitlines():
        match = DURATION.match(line)
        if match is None:
            continue
        took, phase, path, name = float(match[1]), match[2], match[3], match[4]
        seconds[path] += took
        tests[path].add(name)
        if phase == "setup":
            setup[path] += took
        if path not in slowest or took > slowest[path][0]:  # a file of 0.00 s items has a slowest too
            slowest[path] = (took, f"{phase} {name}")
    total = sum(seconds.values())
    summary = next((line for line in reversed(proc.stdout.splitlines()) if " in " in line and "passed" in line),
                   "(no pytest summary: see its output)")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print(f"`{' '.join(command[1:])}`: {summary.strip('= ')}")
    print(f"wall {wall / 60:.0f} min {wall % 60:.0f} s; {total:.0f} test-seconds over {args.workers} workers "
          f"({total / args.workers / 60:.1f} min if they shared it evenly)\n")
    print("| file | tests | test-seconds | in fixtures | slowest |")
    print("|---|---:|---:|---:|---|")
    ranked = sorted(seconds.items(), key=lambda item: -item[1])
    for path, took in ranked[:args.top]:
        worst, what = slowest[path]
        in_fixtures = 100 * setup[path] / took if took else 0.0
        print(f"| {path} | {len(tests[path])} | {took:.1f} | {in_fixtures:.0f} % | {worst:.1f} s {what} |")
    rest = ranked[args.top:]
    if rest:
        print(f"| the other {len(rest)} files | {sum(len(tests[p]) for p, _ in rest)} "
              f"| {sum(t for _, t in rest):.1f} | | |")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
