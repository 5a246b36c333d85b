"""What a run's messages mean (grader/run/blame.py), on made-up runs: no processes, no clocks."""

from __future__ import annotations

import dataclasses
import signal

from grader.run.blame import Context, RunEnd, Trace, settle
from grader.wire.messages import (
    Calling,
    Canary,
    CellStop,
    CheckEnded,
    CheckStarted,
    DeviceFound,
    Done,
    FunctionTimedOut,
    GraderBroken,
    LearnerLost,
    TopLevelEvent,
)

CHECKS = ("ex1.a", "ex1.b", "ex3.c")
CONTEXT = Context(CHECKS, {"ex1.a": "ex1", "ex1.b": "ex1", "ex3.c": "ex3"},
                  {"ex1": ("ex1_device", "ex1_device.py"), "ex3": ("ex3_roundtrip", "ex3_roundtrip.py")},
                  cell_timeout_s=10.0, max_processes=256, cpu_seconds=600, first_run=True)
DEVICE = DeviceFound("cpu", "x86_64", "2.13.0", True)
IMPORTED = [TopLevelEvent("importing", "ex1_device"), TopLevelEvent("cell_start", "ex1_device", 0, "line 1"),
            TopLevelEvent("cell_end", "ex1_device", 0, "line 1"), TopLevelEvent("imported", "ex1_device")]


def trace_of(*messages: object) -> Trace:
    trace = Trace()
    for message in messages:
        trace.add(message)
    return trace


def ended(check: str, status: str = "passed", message: str = "") -> CheckEnded:
    return CheckEnded(check, status, message)  # type: ignore[arg-type]


def test_a_clean_run_keeps_every_verdict() -> None:
    trace = trace_of(DEVICE, *IMPORTED, *(m for c in CHECKS for m in (CheckStarted(c), ended(c))),
                     Canary("failed"), Done(0))
    settled = settle(trace, RunEnd(None, 0), CONTEXT)
    assert {c: o.status for c, o in settled.outcomes.items()} == dict.fromkeys(CHECKS, "passed")
    assert settled.notes == () and settled.grader_error is None and settled.device is not None


def test_nothing_of_the_learner_ran_is_the_graders_failure() -> None:
    broken = settle(trace_of(DEVICE, GraderBroken("checks_not_loaded", "No module named 'numpy'"), Done(4)),
                    RunEnd(None, 0), CONTEXT)
    assert broken.grader_error is not None and broken.grader_error.kind == "checks_not_loaded"
    assert broken.outcomes == {}
    silent = settle(trace_of(), RunEnd(None, 1, judge_output="ImportError: torch\n"), CONTEXT)
    assert silent.grader_error is not None and silent.grader_error.kind == "child_start_failed"
    assert "ImportError: torch" in silent.grader_error.error


def test_a_grader_failure_claimed_after_the_learner_started_is_not_believed() -> None:
    trace = trace_of(DEVICE, *IMPORTED, GraderBroken("checks_not_loaded", "claimed late"), CheckStarted("ex1.a"))
    settled = settle(trace, RunEnd(None, -signal.SIGKILL), CONTEXT)
    assert settled.grader_error is None
    assert settled.outcomes["ex1.a"].message_id == "child_died"


def test_a_canary_spared_voids_the_run() -> None:
    trace = trace_of(DEVICE, *IMPORTED, CheckStarted("ex1.a"), ended("ex1.a"), Canary("passed"), Done(0))
    settled = settle(trace, RunEnd(None, 0), CONTEXT)
    assert settled.notes == ("tampering",)
    assert settled.outcomes["ex1.a"].message_id == "tampered"


def test_forged_lines_are_noted_and_change_no_verdict() -> None:
    trace = trace_of(DEVICE, *IMPORTED, CheckStarted("ex1.a"), ended("ex1.a"), Canary("failed"), Done(0))
    settled = settle(trace, RunEnd(None, 0, forged=3), CONTEXT)
    assert settled.notes == ("tampering",) and settled.outcomes["ex1.a"].status == "passed"


def test_a_broken_protocol_fails_the_check_it_broke() -> None:
    broke = trace_of(DEVICE, *IMPORTED, CheckStarted("ex1.a"), ended("ex1.a"), CheckStarted("ex1.b"),
                     LearnerLost("broke_protocol", "a frame that is not JSON"))
    settled = settle(broke, RunEnd(None, -signal.SIGKILL), CONTEXT)
    assert settled.notes == ("tampering",)
    assert {c: o.message_id for c, o in settled.outcomes.items()} == {"ex1.a": "", "ex1.b": "learner_broke_protocol"}


def test_dying_in_a_check_charges_that_check_only() -> None:
    trace = trace_of(DEVICE, *IMPORTED, CheckStarted("ex1.a"), ended("ex1.a"), CheckStarted("ex1.b"),
                     Calling("ex1_device.pick_device"), LearnerLost("ended"))
    settled = settle(trace, RunEnd(None, 3), CONTEXT)
    assert settled.outcomes["ex1.a"].status == "passed"
    assert (settled.outcomes["ex1.b"].status, settled.outcomes["ex1.b"].message_id) == ("error", "child_died")
    assert settled.outcomes["ex1.b"].params["code"] == "exit code 3"
    assert "ex3.c" not in settled.outcomes  # the next run grades it


def test_a_stuck_call_is_a_timeout_and_its_function_is_remembered() -> None:
    trace = trace_of(DEVICE, *IMPORTED, CheckStarted("ex3.c"), Calling("ex3_roundtrip.roundtrip"))
    settled = settle(trace, RunEnd("check_timeout", -signal.SIGKILL), CONTEXT)
    assert (settled.outcomes["ex3.c"].status, settled.outcomes["ex3.c"].message_id) == ("timeout", "check_timeout")
    assert settled.timed_out == frozenset({"ex3_roundtrip.roundtrip"})


def test_a_call_the_learner_process_interrupted_is_remembered_too() -> None:
    trace = trace_of(DEVICE, *IMPORTED, CheckStarted("ex3.c"), Calling("ex3_roundtrip.roundtrip"),
                     FunctionTimedOut("ex3_roundtrip.roundtrip"), ended("ex3.c", "timeout", "check_timeout"), Done(1))
    settled = settle(trace, RunEnd(None, 0), CONTEXT)
    assert settled.timed_out == frozenset({"ex3_roundtrip.roundtrip"})


def test_the_cpu_limit_is_named() -> None:
    trace = trace_of(DEVICE, *IMPORTED, CheckStarted("ex1.a"), LearnerLost("ended"))
    assert settle(trace, RunEnd(None, -signal.SIGXCPU), CONTEXT).outcomes["ex1.a"].message_id == "cpu_limit"


def test_dying_in_a_top_level_cell_skips_it_next_time_and_charges_nothing() -> None:
    trace = trace_of(DEVICE, TopLevelEvent("importing", "ex3_roundtrip"),
                     TopLevelEvent("cell_start", "ex3_roundtrip", 2, "In [3]"), LearnerLost("ended"))
    settled = settle(trace, RunEnd(None, -signal.SIGSEGV), CONTEXT)
    assert settled.outcomes == {}
    assert settled.skip == (("ex3_roundtrip", 2),)
    (stop,) = settled.stops
    assert (stop.label, stop.kind, stop.error) == ("In [3]", "ended_process", "signal SIGSEGV")
    timed = settle(trace, RunEnd("cell_timeout", -signal.SIGKILL), CONTEXT)
    assert timed.stops[0].kind == "timeout" and timed.skip == (("ex3_roundtrip", 2),)


def test_dying_while_importing_outside_a_cell_charges_that_files_exercises() -> None:
    trace = trace_of(DEVICE, TopLevelEvent("importing", "ex1_device"), LearnerLost("ended"))
    settled = settle(trace, RunEnd("check_timeout", -signal.SIGKILL), CONTEXT)
    assert {c: o.message_id for c, o in settled.outcomes.items()} == {"ex1.a": "import_timeout",
                                                                      "ex1.b": "import_timeout"}


def test_a_stopped_cell_is_recorded_once_and_what_it_kept_goes_with_it() -> None:
    stop = CellStop("ex1_device", 1, "In [2]", 1, "no_gpu", "AssertionError: Torch not compiled with CUDA enabled")
    trace = trace_of(DEVICE, TopLevelEvent("cell_stop", "ex1_device", 1, "In [2]", stop=stop),
                     TopLevelEvent("cell_stop", "ex1_device", 1, "In [2]", stop=stop),
                     TopLevelEvent("cell_kept", "ex1_device", 4, "In [5]", kept=("pick_device",)),
                     CheckStarted("ex1.a"), ended("ex1.a"), Canary("failed"), Done(0))
    settled = settle(trace, RunEnd(None, 0), CONTEXT)
    assert settled.stops == (stop,)
    assert settled.kept == {("ex1_device", 4): ("pick_device",)}


def test_learner_controlled_text_is_capped() -> None:
    long = "x" * 10_000
    stop = CellStop("ex1_device", 0, long, None, "error", long, (long,) * 100)
    trace = trace_of(DEVICE, TopLevelEvent("cell_stop", "ex1_device", 0, long, stop=stop),
                     CheckStarted("ex1.a"), CheckEnded("ex1.a", "error", "learner_raised", {"error": long}),
                     Calling(long), LearnerLost("ended"))
    settled = settle(trace, RunEnd("check_timeout", -9), CONTEXT)
    (kept,) = settled.stops
    assert len(kept.label) <= 40 and len(kept.error) <= 340 and len(kept.kept) <= 50
    assert kept.error.endswith(" […9700 more characters cut]")  # a cut says where, and how much
    error = settled.outcomes["ex1.a"].params["error"]
    assert len(error) <= 540 and error.endswith(" […9500 more characters cut]")


def test_the_memory_cgroup_stopping_the_learner_is_the_memory_limit() -> None:
    """Issue 23: memory held through memfd_create passed RLIMIT_DATA; the run's memory cgroup stops
    the process, and the check (or the cell) says it was the memory limit, not a crash."""
    killed = RunEnd(None, -signal.SIGKILL, memory_killed=True)
    in_check = settle(trace_of(DEVICE, *IMPORTED, CheckStarted("ex1.a"), Calling("ex1_device.f")), killed, CONTEXT)
    assert (in_check.outcomes["ex1.a"].status, in_check.outcomes["ex1.a"].message_id) == ("error", "memory_held")
    assert in_check.outcomes["ex1.a"].params["limit_mb"] == "6144"
    in_cell = settle(trace_of(DEVICE, TopLevelEvent("importing", "ex1_device"),
                              TopLevelEvent("cell_start", "ex1_device", 0, "line 1")), killed, CONTEXT)
    assert [(s.kind, s.error) for s in in_cell.stops] == [
        ("memory", "it held more than 6144 MiB, shared memory included")]


def test_a_protocol_break_in_a_cell_is_recorded_as_tampering_and_skipped() -> None:
    broke = settle(trace_of(DEVICE, TopLevelEvent("importing", "ex1_device"),
                            TopLevelEvent("cell_start", "ex1_device", 0, "line 1"),
                            LearnerLost("broke_protocol", "a frame over the limit")), RunEnd(None, 0), CONTEXT)
    assert [s.kind for s in broke.stops] == ["tampered"] and broke.skip == (("ex1_device", 0),)
    assert "tampering" in broke.notes


def test_the_wall_clock_running_out_between_runs_is_the_learners_not_the_graders() -> None:
    later = dataclasses.replace(CONTEXT, first_run=False, run_timeout_s=40.0)
    settled = settle(trace_of(), RunEnd("run_timeout", None), later)
    assert settled.grader_error is None
    assert {o.message_id for o in settled.outcomes.values()} == {"run_timeout"}
    assert all(o.params == {"wall_s": "40"} for o in settled.outcomes.values())
