"""Runs side by side: a grading's checks split into the course's lanes, each lane graded by runs of its own.

In one run the judge and the learner process take turns — the judge asks, the learner computes, the judge
compares — so a grading keeps one core busy and leaves the other idle once both processes are up. Where
the machine has a second core and no GPU to share (grader/run/share.py ``lanes_here``), ``grader grade``
grades the course's lanes (course.yaml ``lanes``: groups of exercises) at once, each in its own judge
and learner process forked from the same warm servers (grader/run/launch.py ``ForkLauncher``), and merges
what they found as one run's. Each lane's learner process runs its own exercises' modules, as a restart's
does (grader/run/sandbox.py ``start_message``), and another's only when one of them imports it (`from
ex1_device import pick_device`), so nothing runs twice that one run would not — and where two lanes'
exercises live in one module (a notebook holds them all), the checks run in one lane, as before.

Measured (docs/performance.md, tenth session): `grade()` of the solutions 2.67 s in one run, 2.27 s in two
lanes, medians of five rounds alternated with a bare `import torch` (1.81 s).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Mapping, Sequence

from grader.course import CheckSpec
from grader.run.launch import Launcher
from grader.run.sandbox import SandboxRun, run_checks
from grader.wire.messages import Limits, RequestedDevice, Source


def lanes_of(checks: Sequence[CheckSpec], lanes: Sequence[Sequence[str]], sources: Mapping[str, Source],
             most: int) -> list[list[CheckSpec]]:
    """``checks`` split by the course's ``lanes`` (exercise ids), in the lanes' order: one list (a single
    run) where ``most`` is 1, where fewer than two lanes have checks to run or more than ``most`` do, or
    where two lanes' exercises share a module."""
    groups = [[c for c in checks if c.exercise in lane] for lane in lanes] if most > 1 else []
    groups = [group for group in groups if group]
    modules = [{sources[c.exercise].module for c in group} for group in groups]
    shared = any(a & b for i, a in enumerate(modules) for b in modules[i + 1:])
    if not 2 <= len(groups) <= most or shared or sum(map(len, groups)) != len(checks):
        return [list(checks)]
    return groups


def run_in_lanes(sources: Mapping[str, Source], lanes: list[list[CheckSpec]], *, device: RequestedDevice,
                 limits: Limits, launcher: Launcher, seed: int, helpers: tuple[Source, ...] = ()) -> SandboxRun:
    """Each lane's checks graded at once (``run_checks``, a thread each), merged as one run's results. Each
    lane has the course's limits, its wall clock and its top level's time included (its modules only), but
    keeps its share of ``output_kb``: the report holds no more of what the learner's code printed than one
    run's would."""
    if len(lanes) == 1:
        return run_checks(sources, lanes[0], device=device, limits=limits, launcher=launcher, seed=seed,
                          helpers=helpers)
    shared = dataclasses.replace(limits, output_kb=max(1, limits.output_kb // len(lanes)))
    stop = threading.Event()  # a Ctrl-C comes to this thread: the lanes' threads end their runs on it
    pool = concurrent.futures.ThreadPoolExecutor(len(lanes), thread_name_prefix="lane")
    try:
        futures = [pool.submit(run_checks, sources, lane, device=device, limits=shared, launcher=launcher, seed=seed,
                               stop=stop, helpers=helpers) for lane in lanes]
        return merged([future.result() for future in futures])
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True)


def merged(runs: Sequence[SandboxRun]) -> SandboxRun:
    """The lanes' runs as one: every outcome; the first device and isolation seen; notes once each, in
    order; what the learner's code printed, lane after lane in the course's order; the wall clock of the
    longest lane."""
    first = runs[0]
    return dataclasses.replace(
        first,
        outcomes={check: outcome for run in runs for check, outcome in run.outcomes.items()},
        device=next((run.device for run in runs if run.device is not None), None),
        notes=tuple(dict.fromkeys(note for run in runs for note in run.notes)),
        children=sum(run.children for run in runs),
        output="".join(run.output for run in runs),
        grader_error=next((run.grader_error for run in runs if run.grader_error is not None), None),
        stops=tuple(stop for run in runs for stop in run.stops),
        out_of_time=any(run.out_of_time for run in runs),
        learner_seconds=max(run.learner_seconds for run in runs),
    )
