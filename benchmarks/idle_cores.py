"""Where a class's cores sit idle: the kernel's context switches over one `grader batch`, phase by phase.

    python benchmarks/idle_cores.py [--learners 16] [--workers 2] [--keep TRACE_FILE]

Root only, with tracefs (mounted at /sys/kernel/tracing where it is not). Traces ``sched_switch`` and every
process's fork, exec and exit, on the trace clock ``mono``, while ``grader batch`` grades a class of the
reference solutions (bubblewrap where the machine has it, as ``grader batch`` chooses), then reads from the
trace alone: when each core went idle and what ran next; which process is the command, its two fork servers and
each learner's processes (the children of the learner's server: the one under bubblewrap with the most forks);
and prints the idle core-seconds of each phase — the command before its servers' first fork, the servers'
imports, the learners (and how much of that idle lies within 60 ms of a learner's first fork or last exit), the
end — and how long each learner's first process slept uninterruptibly within 50 ms of its fork (the cgroup join,
docs/performance.md twenty-first session). A figure to compare before and after a change, nothing asserted;
the idle of this project's shared 2-core machine moves by ±30 % between identical runs.
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACEFS = Path("/sys/kernel/tracing")
EVENTS = ("sched/sched_switch", "sched/sched_process_fork", "sched/sched_process_exec", "sched/sched_process_exit")
LINE = re.compile(r"^\s*.+?-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$")
FIELD = re.compile(r"(\w+)=(\S+)")
NEAR_S = 0.06  # idle this close to a learner's start or end counts as the transition's
JOIN_WINDOW_S = 0.05  # a learner's first process: its sleeps this soon after its fork
BUFFER_KB = 32768  # each CPU's trace buffer: a class of 16 wrote ~41 000 events in all


@dataclass(frozen=True)
class Event:
    time: float
    cpu: int
    name: str
    fields: dict[str, str]


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="ascii")


def trace(command: list[str], keep: Path | None) -> list[Event]:
    """``command`` run under the tracer; its events in order."""
    if not (TRACEFS / "events").is_dir():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=True)
    _write(TRACEFS / "tracing_on", "0")
    _write(TRACEFS / "trace", "")
    _write(TRACEFS / "buffer_size_kb", str(BUFFER_KB))
    _write(TRACEFS / "trace_clock", "mono")
    for event in EVENTS:
        _write(TRACEFS / "events" / event / "enable", "1")
    try:
        _write(TRACEFS / "tracing_on", "1")
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        _write(TRACEFS / "tracing_on", "0")
        text = (TRACEFS / "trace").read_text(encoding="utf-8", errors="replace")
        lost = sum(int(line.split()[1]) for stats in (TRACEFS / "per_cpu").glob("cpu*/stats")
                   for line in stats.read_text(encoding="ascii").splitlines() if line.startswith("overrun:"))
        if lost:
            print(f"the trace lost its {lost} oldest events (its buffer filled): grade fewer learners")
    finally:
        _write(TRACEFS / "tracing_on", "0")
        for event in EVENTS:
            _write(TRACEFS / "events" / event / "enable", "0")
        _write(TRACEFS / "trace", "")
    if keep is not None:
        keep.write_text(text, encoding="utf-8")
    events = []
    for line in text.splitlines():
        match = LINE.match(line)
        if match:
            _, cpu, time, name, rest = match.groups()
            events.append(Event(float(time), int(cpu), name, dict(FIELD.findall(rest))))
    return events


@dataclass(frozen=True)
class Tree:
    parent: dict[int, int]
    execs: dict[int, str]  # pid -> the basename it exec'd
    forked: dict[int, float]
    exited: dict[int, float]

    def ancestors(self, pid: int) -> list[int]:
        chain = [pid]
        while chain[-1] in self.parent and len(chain) < 64:
            chain.append(self.parent[chain[-1]])
        return chain


def tree_of(events: list[Event]) -> Tree:
    parent: dict[int, int] = {}
    execs: dict[int, str] = {}
    forked: dict[int, float] = {}
    exited: dict[int, float] = {}
    for event in events:
        if event.name == "sched_process_fork":
            child = int(event.fields["child_pid"])
            parent[child] = int(event.fields["pid"])
            forked[child] = event.time
        elif event.name == "sched_process_exec":
            execs[int(event.fields["pid"])] = event.fields["filename"].rsplit("/", 1)[-1]
        elif event.name == "sched_process_exit":
            exited[int(event.fields["pid"])] = event.time
    return Tree(parent, execs, forked, exited)


def idle_intervals(events: list[Event]) -> list[tuple[float, float]]:
    began: dict[int, float] = {}
    spans = []
    for event in events:
        if event.name != "sched_switch":
            continue
        if event.fields["next_pid"] == "0":
            began[event.cpu] = event.time
        elif event.fields["prev_pid"] == "0" and event.cpu in began:
            spans.append((began.pop(event.cpu), event.time))
    return spans


def asleep(events: list[Event]) -> dict[int, list[tuple[float, float]]]:
    """Each process's uninterruptible sleeps (state D)."""
    out: dict[int, tuple[float, str]] = {}
    sleeps: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for event in events:
        if event.name != "sched_switch":
            continue
        out[int(event.fields["prev_pid"])] = (event.time, event.fields["prev_state"])
        came = int(event.fields["next_pid"])
        if came in out:
            left, state = out.pop(came)
            if state.startswith("D"):
                sleeps[came].append((left, event.time))
    return sleeps


def report(events: list[Event]) -> None:
    tree = tree_of(events)
    command = next(pid for pid, name in tree.execs.items() if name.startswith("python"))
    started, ended = tree.forked.get(command, events[0].time), tree.exited.get(command, events[-1].time)
    forks: dict[int, list[int]] = defaultdict(list)
    for child, pid in tree.parent.items():
        forks[pid].append(child)
    # The learner's server: the Python under bubblewrap (or the command) whose children are the learners.
    pythons = [pid for pid, name in tree.execs.items() if name.startswith("python") and pid != command
               and command in tree.ancestors(pid)]
    sandboxed = [pid for pid in pythons if any(tree.execs.get(a) == "bwrap" for a in tree.ancestors(pid))]
    if not sandboxed:  # without one, the two servers look alike in the trace: a Python forking a child a learner
        sys.exit("no learner server in a bubblewrap sandbox in the trace: this script reads the default path")
    server = max(sandboxed, key=lambda pid: len(forks[pid]))
    learners = sorted(forks[server], key=lambda pid: tree.forked[pid])
    first_fork = tree.forked[learners[0]]

    def last_exit(pid: int) -> float:
        return max([tree.exited.get(pid, ended), *(last_exit(child) for child in forks[pid])])

    ends = [last_exit(pid) for pid in learners]
    last = max(ends)
    spans = idle_intervals(events)

    def idle(a: float, b: float) -> float:
        return sum(max(0.0, min(e, b) - max(s, a)) for s, e in spans)

    marks = sorted([tree.forked[pid] for pid in learners] + ends)  # each learner's first fork and last exit

    def at_a_transition(t: float) -> bool:
        i = bisect.bisect_left(marks, t)
        return any(abs(t - marks[j]) < NEAR_S for j in (i - 1, i) if 0 <= j < len(marks))

    near = sum(e - s for s, e in spans if first_fork <= s and e <= last and at_a_transition(s))

    def own(pid: int) -> bool:  # the command or one of its threads (a server is started from a thread of its own)
        chain = tree.ancestors(pid)
        return command in chain and not any(p in tree.execs for p in chain[:chain.index(command)])

    servers_start = min((tree.forked[pid] for pid, name in tree.execs.items()
                         if (name.startswith("python") or name == "bwrap") and pid in tree.parent
                         and own(tree.parent[pid]) and tree.exited.get(pid, ended) > first_fork), default=first_fork)
    print(f"{len(learners)} learner processes forked by the learner's server (a class's last learner may run in "
          f"lanes); the command ran {ended - started:.2f} s, its cores idle {idle(started, ended):.2f} core-s in all")
    print("| phase | wall s | idle core-s |\n|---|---:|---:|")
    print(f"| the command before its servers start | {servers_start - started:.2f} | "
          f"{idle(started, servers_start):.2f} |")
    print(f"| the servers' imports, to the first learner's fork | {first_fork - servers_start:.2f} | "
          f"{idle(servers_start, first_fork):.2f} |")
    print(f"| the learners | {last - first_fork:.2f} | {idle(first_fork, last):.2f}, of which {near:.2f} within "
          f"{NEAR_S * 1000:.0f} ms of a learner's start or end |")
    print(f"| the end | {ended - last:.2f} | {idle(last, ended):.2f} |")
    sleeps = asleep(events)
    joins = [sum(e - s for s, e in sleeps.get(pid, []) if s - tree.forked[pid] < JOIN_WINDOW_S) * 1000
             for pid in learners]
    print(f"each learner's first process asleep in the kernel (state D) within {JOIN_WINDOW_S * 1000:.0f} ms of "
          f"its fork: median {statistics.median(joins):.1f} ms, {min(joins):.1f}-{max(joins):.1f} "
          f"({sum(joins) / 1000:.2f} s in all)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, metavar="TRACE_FILE", help="also keep the raw trace")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the kernel's tracer needs root")
    with tempfile.TemporaryDirectory(prefix="idle-cores-") as tmp:
        work = Path(tmp)
        for i in range(args.learners):
            shutil.copytree(ROOT / "solutions", work / "class" / f"learner{i:02d}")
        command = [sys.executable, "-m", "grader", "batch", str(work / "class"), "-o", str(work / "out"),
                   "--workers", str(args.workers), "--force", "--quiet", "--lang", "en"]
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {' '.join(command[1:4])} "
              f"of {args.learners} on {args.workers} workers")
        report(trace(command, args.keep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
