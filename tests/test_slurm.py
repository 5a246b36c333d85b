"""The Slurm scripts of docs/instructors.md run for real: a single-node cluster of the test's own
(tests/slurm_cluster.py), ``docs/slurm/submit.sh`` submitting ``docs/slurm/grade.sbatch`` as a job
array of two shards and the merge after them, over the Canvas class of tests/roster_class.py; the
merged gradebook must be the gradebook of the same class graded in one local batch.

Skipped, saying why, where the cluster cannot start (no Slurm packages, not root). No timing is
asserted: the waits are only bounds against a job that never ends.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.roster_class import RosterClass
from tests.slurm_cluster import Cluster, SlurmUnavailable, log_tail, slurm_cluster

SCRIPTS = ROOT / "docs" / "slurm"
# The whole array and its merge, on a machine busy with other work: a bound, not an expectation.
JOB_WAIT_S = 1800


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    try:
        with slurm_cluster() as running:
            yield running
    except SlurmUnavailable as exc:
        pytest.skip(f"no Slurm cluster here: {exc}")


def wait_for(job: str, env: dict[str, str], cluster: Cluster, logs: Path) -> str:
    """The job's final state, once it has left the queue."""
    deadline = time.monotonic() + JOB_WAIT_S
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, env=env,
                         check=False).stdout.strip():
        assert time.monotonic() < deadline, f"job {job} still queued after {JOB_WAIT_S} s: {log_tail(cluster.root)}"
        time.sleep(2)
    shown = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True, env=env,
                           check=False).stdout
    state = re.search(r"JobState=(\w+)", shown)
    job_logs = "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(logs.glob("*")))
    assert state is not None, shown
    return state.group(1) if state.group(1) == "COMPLETED" else f"{state.group(1)}\n{shown}\n{job_logs}"


def test_the_documented_array_grades_the_class_as_one_batch(cluster: Cluster, roster_class: RosterClass,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "grades"
    # The jobs inherit the submitting shell's environment (sbatch --export=ALL): `grader` on PATH.
    env = {**os.environ, **cluster.env, "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # The documented command; the options after the roster resize the shards for this small machine.
    submitted = subprocess.run(
        ["bash", str(SCRIPTS / "submit.sh"), str(roster_class.submissions), str(out), str(roster_class.roster),
         "--array=1-2", "--cpus-per-task=1", "--mem=4G"],
        capture_output=True, text=True, cwd=tmp_path, env=env, check=False, timeout=120)
    assert submitted.returncode == 0, submitted.stderr
    merge_job = submitted.stdout.strip().splitlines()[-1].split(";")[0]
    assert wait_for(merge_job, env, cluster, tmp_path / "logs") == "COMPLETED"
    shards = sorted(p.name for p in out.glob("shard-*"))
    assert shards == ["shard-1", "shard-2"]
    # Both shards graded: each holds some of the class, together all of it.
    graded = [{p.stem for p in (out / shard).glob("*.yaml")} - {"roster", "summary"} for shard in shards]
    assert all(graded) and not graded[0] & graded[1]
    assert (out / "all" / "gradebook.csv").read_text(encoding="utf-8") == (
        roster_class.out / "gradebook.csv").read_text(encoding="utf-8")
    assert (out / "all" / "roster.yaml").read_text(encoding="utf-8") == (
        roster_class.out / "roster.yaml").read_text(encoding="utf-8")


def fenced_blocks(markdown: Path) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", markdown.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)


def test_the_docs_show_the_scripts_this_test_runs() -> None:
    """What an instructor copies from the docs is exactly what ran on the cluster above."""
    for script in ("grade.sbatch", "submit.sh"):
        text = (SCRIPTS / script).read_text(encoding="utf-8")
        assert text in fenced_blocks(ROOT / "docs" / "instructors.md"), f"docs/instructors.md lacks {script}"
