"""Grade every known submission on the real GPU and print one table.

    python benchmarks/validate_gpu.py [--device cuda] [--workers 4] [--out docs/gpu-validation.md]

Grades the reference solutions, the other correct styles, the stubs and every file of the
mistake catalog (all listed in tests/submissions/catalog.py) with ``--device cuda``, and compares each
outcome with what the tests expect on the CPU. Needs only torch, pytest, pytest-timeout and
pyyaml on the GPU machine (no nbformat: only .py submissions are graded here). Exit status 1
when any outcome differs from the expectation.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.course import load_course  # noqa: E402
from grader.grading import grade  # noqa: E402
from grader.run.isolation import GPU_COUNT, probe  # noqa: E402
from grader.run.launch import ForkLauncher, Launcher  # noqa: E402
from grader.run.share import machine_share  # noqa: E402
from grader.score.results import Report  # noqa: E402
from tests.submissions.catalog import CORRECT_STYLES, Mistake, mistakes  # noqa: E402

# Checks whose verdict is relative to the grading machine, by kind of real device: on a CUDA machine
# a pick_device() that hard-codes torch.device("cuda") returns this machine's device (the simulated
# machines of ex1's other checks catch it; tests/submissions/mistakes/ex1_device/hardcoded_cuda.py).
MACHINE_RELATIVE: dict[str, set[str]] = {"cuda": {"ex1.pick_device_returns_device"}}
TORCH_COUNT = "import torch; print(torch.cuda.device_count())"  # what GPU_COUNT stands in for


@dataclass(frozen=True)
class Row:
    submission: str
    expected: str
    outcome: str
    seconds: float
    modes: str
    said: str = ""  # what the checks that lost points said, for a row that differs (no second run to ask)

    @property
    def ok(self) -> bool:
        return self.expected == self.outcome


def _lost(report: Report, exercise: str | None = None) -> list[str]:
    return sorted(c.id for ex in report.exercises if exercise in (None, ex.id) for c in ex.checks
                  if c.status != "passed")


def _said(report: Report) -> str:
    """Each check that lost points, with its message and the seed that regrades it identically."""
    return " / ".join(f"{c.id}: {' '.join(c.message.split())[:300]}" for ex in report.exercises
                      for c in ex.checks if c.status != "passed") + f" (seed {report.seed})"


def _modes(report: Report) -> str:
    return ",".join(sorted({str(c.mode) for ex in report.exercises for c in ex.checks if c.mode}))


def _grade_correct(name: str, source: Path, device: str, work: Path, launcher: Launcher) -> Row:
    folder = work / name
    shutil.copytree(source, folder)
    started = time.monotonic()
    report = grade(folder, load_course(), device=device, lang="en", launcher=launcher)
    outcome = "100" if not _lost(report) else f"{report.score:g}: lost {', '.join(_lost(report))}"
    return Row(name, "100", outcome, time.monotonic() - started, _modes(report), _said(report))


def _grade_stubs(device: str, work: Path, launcher: Launcher) -> Row:
    folder = work / "stubs"
    shutil.copytree(ROOT / "exercises", folder)
    started = time.monotonic()
    report = grade(folder, load_course(), device=device, lang="en", launcher=launcher)
    statuses = {ex.status for ex in report.exercises}
    return Row("stubs", "0, not_attempted", f"{report.score:g}, {','.join(sorted(statuses))}",
               time.monotonic() - started, _modes(report))


def _grade_mistake(mistake: Mistake, device: str, work: Path, launcher: Launcher) -> Row:
    folder = work / mistake.name.replace("/", "__")
    folder.mkdir()
    shutil.copy(mistake.path, folder / f"{mistake.module}.py")
    started = time.monotonic()
    report = grade(folder, load_course(), device=device, lang="en", exercises=[mistake.exercise],
                   launcher=launcher)
    # A check judged against the grading machine's own devices cannot fail a mistake that names them.
    relative = MACHINE_RELATIVE.get(report.device.type, set()) if not report.device.standin else set()
    expected = sorted(set(mistake.fails) - relative)
    lost = [check for check in _lost(report, mistake.exercise) if check not in relative]
    return Row(mistake.name, "lose " + ", ".join(expected), "lose " + ", ".join(lost),
               time.monotonic() - started, _modes(report), _said(report))


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _probe(torch: Any) -> list[str]:
    """The figures the real-GPU thresholds rest on, measured here (each line may fail alone)."""
    from grader.checks.ex2_timing.test_returns_mean_not_total import REAL_TOTAL_RATIO
    from grader.checks.ex4_oom.budget import fill_budget
    from grader.judge.devices import runs_amp
    from grader.learner.sessions import RealSession, hello
    from grader.reference.draws import Draw
    from grader.wire.messages import MiB

    if not torch.cuda.is_available():
        return ["no CUDA device: nothing probed"]
    device = torch.device("cuda")
    found = hello("cuda")  # what the learner process tells the judge about this GPU
    lines = []

    # The smallest and the largest fill budget a grading draws (grader/reference/draws.py).
    draws = sorted((Draw(seed) for seed in range(200)), key=fill_budget)
    smallest, largest = draws[0], draws[-1]

    def capacity(draw: Draw) -> str:
        with RealSession("cuda", fill_budget(draw)) as acc:
            return str(acc.fill_capacity(draw.chunk_mb * MiB))

    def ratio(path: Path) -> str:
        module = _load(path, f"probe_{path.stem}")
        module.time_matmul(2048, device, repeats=2)  # warm the library for this size
        return f"{module.time_matmul(2048, device, repeats=8) / module.time_matmul(2048, device, repeats=2):.2f}"

    def amp_ratios() -> str:
        """ex5's AMP/FP32 peak over every correct style, as the meter counts it (live tensors) and
        as the caching allocator does (torch.cuda.max_memory_allocated), bf16 and fp16."""
        from grader.checks.ex5_amp.test_amp_saves_memory import AMP_PEAK_RATIO, PROBLEM
        from grader.learner.instruments import metered
        from grader.reference.problems import ex5_problem

        meter_ratios: list[float] = []
        allocator_ratios: list[float] = []
        for name, folder in CORRECT_STYLES.items():
            module = _load(folder / "ex5_amp.py", f"probe_ex5_{name.replace('/', '_')}")

            def peaks(module: Any, dtype: Any) -> tuple[int, int]:
                model, x, y = ex5_problem(*PROBLEM, 10, 7)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
                with metered(None, "probe", None) as meter:
                    module.train_steps(model, x, y, device, steps=1, amp_dtype=dtype)
                torch.cuda.synchronize()
                return meter.peak, torch.cuda.max_memory_allocated() - before

            fp32 = peaks(module, None)
            for dtype in (torch.bfloat16, torch.float16):
                amp = peaks(module, dtype)
                meter_ratios.append(amp[0] / fp32[0])
                allocator_ratios.append(amp[1] / max(fp32[1], 1))
        return (f"meter {min(meter_ratios):.3f}-{max(meter_ratios):.3f}, allocator {min(allocator_ratios):.3f}-"
                f"{max(allocator_ratios):.3f} over {len(CORRECT_STYLES)} styles x bf16/fp16 at {PROBLEM} "
                f"(bound {AMP_PEAK_RATIO}; stand-ins 0.62-0.65)")

    def counted(program: str) -> str:
        """A fresh Python that counts the devices, with the environment a learner process gets."""
        from grader.run.isolation import PASSED_ENV

        env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env,
                              timeout=120, check=False)
        said = done.stdout.strip() or (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"{said} in {time.monotonic() - started:.2f} s"

    probes = {
        "ex5 AMP/FP32 peak on the GPU": amp_ratios,
        "devices counted by torch in a fresh Python": lambda: counted(TORCH_COUNT),
        "devices counted by the driver in a fresh Python (isolation.GPU_COUNT)": lambda: counted(GPU_COUNT),
        "bf16 / fp16 AMP graded on the GPU": lambda: f"{runs_amp(found, 'cuda', torch.bfloat16)} / "
                                                    f"{runs_amp(found, 'cuda', torch.float16)}",
        f"chunks of {smallest.chunk_mb} MiB that fit under the smallest fill cap (stand-in: "
        f"{smallest.chunks_that_fit})": lambda: capacity(smallest),
        f"chunks of {largest.chunk_mb} MiB that fit under the largest fill cap (stand-in: "
        f"{largest.chunks_that_fit})": lambda: capacity(largest),
        f"time_matmul(2048) 8 repeats / 2, solutions (a mean: ~1; bound {REAL_TOTAL_RATIO})":
            lambda: ratio(ROOT / "solutions" / "ex2_timing.py"),
        "the same, mistakes/ex2_timing/total_not_mean (a total: ~4)":
            lambda: ratio(ROOT / "tests" / "submissions" / "mistakes" / "ex2_timing" / "total_not_mean.py"),
    }
    for label, measure in probes.items():
        try:
            lines.append(f"- {label}: {measure()}")
        except Exception as exc:  # noqa: BLE001 - a probe that breaks is itself a finding
            lines.append(f"- {label}: failed, {type(exc).__name__}: {exc}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "mps", "auto", "cpu"))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None, help="also write the table as Markdown here")
    args = parser.parse_args()
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    started = time.monotonic()
    isolation = probe()  # bubblewrap's trial and, on a GPU machine, the devices counted inside it
    isolation_line = (f"Isolation: {isolation.mode} (every grading), found in {time.monotonic() - started:.1f} s; "
                      f"missing: {'; '.join(isolation.missing) or 'nothing'}")
    work = Path(tempfile.mkdtemp(prefix="gpu-validation-"))
    try:
        # As `grader batch` does: each worker forks its processes from warm servers (grader/run/launch.py).
        # Each worker's processes get their share of the cores and of the GPU's memory, as `grader batch
        # --workers N` gives them (grader/run/share.py): with every core to each of 8 learners (the run of
        # 2026-12-04 on an H200's 16 cores) a correct grading took 16-28 s there, 4.5 s in `grader batch`.
        share = machine_share(max(args.workers, 1), os.environ)
        # And each in the sandbox this machine allows, as `grader batch` grades (before 2026-12-04's second
        # GPU run this script probed the sandbox but graded without it; the batches there used it).
        with ForkLauncher(share, isolation) as launcher, ThreadPoolExecutor(args.workers) as pool:
            jobs = [pool.submit(_grade_correct, name, path, args.device, work, launcher)
                    for name, path in CORRECT_STYLES.items()]
            jobs.append(pool.submit(_grade_stubs, args.device, work, launcher))
            jobs += [pool.submit(_grade_mistake, m, args.device, work, launcher) for m in mistakes()]
            rows = [job.result() for job in jobs]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    probed = _probe(torch) if args.device in ("cuda", "auto") else []
    lines = [
        f"GPU validation, {time.strftime('%Y-%m-%d')}: {gpu}, torch {torch.__version__}, "
        f"Python {platform.python_version()}, --device {args.device}, {time.monotonic() - started:.0f} s",
        "",
        isolation_line,
        "",
        "| submission | expected | outcome | ok | time (s) | modes |",
        "|---|---|---|---|---|---|",
        *(f"| {r.submission} | {r.expected} | {r.outcome} | {'yes' if r.ok else '**NO**'} "
          f"| {r.seconds:.1f} | {r.modes} |" for r in rows),
        "",
        f"{sum(r.ok for r in rows)} passed, {sum(not r.ok for r in rows)} failed",
        *(["", "What the checks said where a row differs:"] if any(not r.ok for r in rows) else []),
        *(f"- {r.submission}: {r.said}" for r in rows if not r.ok),
        *(["", "Measured for the thresholds:", *probed] if probed else []),
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
