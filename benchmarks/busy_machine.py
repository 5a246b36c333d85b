"""A correct submission never loses a point because the machine is busy.

    python benchmarks/busy_machine.py [--repeats 20] [--load N] [--fork-server] [--isolation auto|none]

Keeps N processes (default: one per core) spinning while it grades each correct style
(tests/submissions/catalog.py) ``--repeats`` times, one after another, and prints
the points each style lost. The count must be zero: timing and memory checks on the stand-in
are deterministic, and those on the real CPU use margins measured for a loaded machine.
``--fork-server``: the sandboxes are forked from a fork server, as in ``grader batch``.
``--isolation``: the learner's code in bubblewrap where the machine allows it (``auto``, as the
command line does by default), or not.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.course import load_course  # noqa: E402
from grader.grading import grade  # noqa: E402
from grader.run.isolation import NONE, probe  # noqa: E402
from grader.run.launch import ForkLauncher, Launcher, grading_launcher  # noqa: E402
from grader.run.share import lanes_here  # noqa: E402
from tests.submissions.catalog import CORRECT_STYLES  # noqa: E402


def _spin(stop: multiprocessing.synchronize.Event) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--fork-server", action="store_true", help="fork the sandboxes, as grader batch does")
    parser.add_argument("--isolation", choices=("auto", "none"), default="auto")
    args = parser.parse_args()
    isolation = probe() if args.isolation == "auto" else NONE
    course = load_course()
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.load)]
    for spinner in spinners:
        spinner.start()
    work = Path(tempfile.mkdtemp(prefix="busy-"))
    lost_total = 0
    servers = ForkLauncher(isolation=isolation) if args.fork_server else None

    # A batch worker grades one run at a time; one ``grader grade`` runs the course's lanes side by side where
    # this machine lets it (grader/run/lanes.py), beside the spinners here.
    lanes = 1 if servers is not None else lanes_here("auto", isolation.learners_fork)

    def launcher_for_one() -> contextlib.AbstractContextManager[Launcher]:
        """A batch worker's warm servers, or what one ``grader grade`` starts its processes with."""
        return contextlib.nullcontext(servers) if servers is not None else grading_launcher(isolation, lanes)

    try:
        print(f"{args.load} busy processes on {os.cpu_count()} cores; {args.repeats} gradings per style"
              f"{', forked sandboxes' if args.fork_server else ''}; isolation: {isolation.mode}; lanes: {lanes}")
        with servers or contextlib.nullcontext():  # fork servers for every grading, as a batch worker has
            for name, source in CORRECT_STYLES.items():
                folder = work / name
                shutil.copytree(source, folder)
                lost, seconds, failures = 0.0, [], set()
                for _ in range(args.repeats):
                    started = time.monotonic()
                    with launcher_for_one() as launcher:
                        report = grade(folder, course, lang="en", launcher=launcher, lanes=lanes)
                    seconds.append(time.monotonic() - started)
                    lost += report.max_score - report.score
                    failures |= {c.id for ex in report.exercises for c in ex.checks if c.status != "passed"}
                lost_total += int(lost)
                print(f"{name:13s} lost {lost:5.1f} points over {args.repeats} runs; "
                      f"{min(seconds):.1f}-{max(seconds):.1f} s a grading; failing: {sorted(failures) or '-'}")
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()
        shutil.rmtree(work, ignore_errors=True)
    print(f"lost points in total: {lost_total}")
    return 0 if lost_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
