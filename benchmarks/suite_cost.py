"""Where the test suite's time goes, file by file (issue 24: the suite under 6 minutes on 2 cores).

    python benchmarks/suite_cost.py [--workers 2] [--top 15] [--items 0] [PYTEST_ARGS ...]

Runs ``pytest -n WORKERS --durations=0`` (the README's test command, every duration kept) and prints,
for each test file, its tests, the seconds its tests and fixtures took (test-seconds: the workers run
side by side, so the wall time is about their sum over the workers), the share in fixtures (a fixture
that grades a catalogue once shows up as one test's setup) and its slowest item. Then the wall time,
the machine's load and the total; with ``--items N``, the N slowest items (setup, call or teardown)
of the whole run; and when each worker's last test ended (benchmarks/suite_timeline.py, a pytest plugin):
the gap is how long one core idled at the end, the cost of the modules' order (tests/conftest.py
``LONGEST_FIRST``). Nothing is asserted: a figure to compare before and after a change,
read with the load beside it (this project's 2-core machine moves by 10 % between identical runs).

``--processes`` (root, with the ``acct`` package's ``accton`` and ``dump-acct``): the kernel's process
accounting around the run, every process's own CPU when it ended: how much of the suite's CPU the machine
was busy for, and how much of it went to Python processes started by exec (each pays its imports; one
that imports torch costs ~2 CPU-s here), to processes forked from a warm one (a server's learner or judge,
an xdist worker's grading) and to the rest (pip, chromium, Slurm, bubblewrap).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DURATION = re.compile(r"^\s*([\d.]+)s (setup|call|teardown)\s+(\S+?)::(\S+)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (README: 2)")
    parser.add_argument("--top", type=int, default=15, help="files to list one by one")
    parser.add_argument("--items", type=int, default=0, help="the slowest items of the run to list")
    parser.add_argument("--processes", action="store_true",
                        help="the run's CPU by kind of process, from the kernel's process accounting (root)")
    args, pytest_args = parser.parse_known_args()
    if args.processes and not (os.geteuid() == 0 and shutil.which("accton") and shutil.which("dump-acct")):
        print("--processes needs root and the acct package (accton, dump-acct)", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as work, _accounting(Path(work) / "pacct", args.processes) as accounted, \
            _busy() as busy:
        timeline = Path(work) / "timeline.json"
        command = [sys.executable, "-m", "pytest", "-n", str(args.workers), "-q", "-p", "no:cacheprovider",
                   "--durations=0", "--durations-min=0", "-p", "suite_timeline", "--suite-timeline", str(timeline),
                   *pytest_args]
        # The plugin is this folder's: on the path of the controller and of the workers it starts.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
        started = time.monotonic()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, env=env)
        wall = time.monotonic() - started
        ends: dict[str, dict[str, Any]] = json.loads(timeline.read_text(encoding="utf-8")) if timeline.exists() else {}
    seconds: dict[str, float] = collections.defaultdict(float)
    setup: dict[str, float] = collections.defaultdict(float)
    tests: dict[str, set[str]] = collections.defaultdict(set)
    slowest: dict[str, tuple[float, str]] = {}
    items: list[tuple[float, str]] = []
    for line in proc.stdout.splitlines():
        match = DURATION.match(line)
        if match is None:
            continue
        took, phase, path, name = float(match[1]), match[2], match[3], match[4]
        seconds[path] += took
        items.append((took, f"{phase} {path}::{name}"))
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
    print(f"wall {int(wall // 60)} min {wall % 60:.0f} s; {total:.0f} test-seconds over {args.workers} workers "
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
    print(f"\nthe machine's CPUs busy {100 * busy.fraction:.0f} % of the run ({busy.seconds:.0f} CPU-s)")
    if len(ends) > 1:
        last = sorted((worker["last_end_s"], name, worker["modules"][-1]) for name, worker in ends.items())
        ended = ", ".join(f"{name} at {end:.0f} s ({module})" for end, name, module in last)
        print(f"the workers' last tests ended: {ended}; one core idle for the last {last[-1][0] - last[0][0]:.1f} s")
    if args.items:
        print(f"\nthe {args.items} slowest items:")
        for took, what in sorted(items, reverse=True)[:args.items]:
            print(f"  {took:6.2f} s {what}")
    if args.processes:
        _print_processes(accounted)
    return proc.returncode


@dataclass
class Busy:
    seconds: float = 0.0  # CPU-seconds all CPUs spent on anything but idle and I/O wait
    fraction: float = 0.0


def _ticks() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text(encoding="utf-8").split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, idle


@contextmanager
def _busy() -> Iterator[Busy]:
    figures = Busy()
    busy0, idle0 = _ticks()
    yield figures
    busy1, idle1 = _ticks()
    ticks = os.sysconf("SC_CLK_TCK")
    figures.seconds = (busy1 - busy0) / ticks
    figures.fraction = (busy1 - busy0) / max(busy1 - busy0 + idle1 - idle0, 1)


@dataclass(frozen=True)
class Ended:
    """One process as the kernel accounted for it when it ended (``dump-acct``)."""

    command: str
    cpu: float  # its own user + system seconds, not its children's
    forked: bool  # forked and never exec'd


@contextmanager
def _accounting(path: Path, on: bool) -> Iterator[list[Ended]]:
    ended: list[Ended] = []
    if not on:
        yield ended
        return
    path.touch()
    subprocess.run(["accton", str(path)], check=True, capture_output=True)
    try:
        yield ended
    finally:
        subprocess.run(["accton", "off"], check=False, capture_output=True)
    dumped = subprocess.run(["dump-acct", str(path)], capture_output=True, text=True, check=True).stdout
    for line in dumped.splitlines():
        f = [x.strip() for x in line.split("|")]
        # comm | version | utime | stime | etime | uid | gid | mem | io | pid | ppid | flags | ... (clock ticks)
        ended.append(Ended(f[0], (float(f[2]) + float(f[3])) / os.sysconf("SC_CLK_TCK"), "F" in f[11]))


def _print_processes(ended: list[Ended]) -> None:
    total = sum(e.cpu for e in ended)
    execd = [e for e in ended if e.command.startswith("python") and not e.forked]
    importers = [e for e in execd if 1.5 <= e.cpu < 6]  # an `import torch` and a little more
    forked = [e for e in ended if e.command.startswith("python") and e.forked]
    print(f"\nprocesses that ended during the run: {len(ended)}, {total:.0f} CPU-s of their own\n")
    print("| processes | count | CPU-s | share |")
    print("|---|---:|---:|---:|")
    rows = [
        ("Python, exec'd, 1.5-6 CPU-s each (an `import torch` and its work)", importers),
        ("Python, exec'd, other (the grader's own CLI, xdist workers, short probes)",
         [e for e in execd if e not in importers]),
        ("Python, forked from a warm process (servers' learners and judges)", forked),
        ("everything else (pip, bubblewrap, chromium, Slurm, shells)",
         [e for e in ended if not e.command.startswith("python")]),
    ]
    for name, group in rows:
        cpu = sum(e.cpu for e in group)
        print(f"| {name} | {len(group)} | {cpu:.0f} | {100 * cpu / max(total, 1e-9):.0f} % |")


if __name__ == "__main__":
    raise SystemExit(main())
