"""A single-node Slurm cluster of the test's own: slurmctld, slurmd and munge from Debian's packages
(``apt-get install slurmctld slurmd munge slurm-client``; .ci/run installs them).

Everything lives in one private folder: the munge key and socket, slurm.conf, the state and spool
folders, the logs; the daemons listen on free ports of 127.0.0.1 and find each other through
``SLURM_CONF``, never /etc/slurm. Only the processes started here are stopped here (by their pid
files), so two runs on one machine never meet. Where the cluster cannot start (no packages, not
root, a daemon that fails), ``SlurmUnavailable`` says why, with the daemons' last log lines.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "sinfo", "scancel")
SBIN = "/usr/sbin:/sbin"
# Seconds for the node to come up: generous, a busy machine starts daemons slowly.
START_WAIT_S = 180


class SlurmUnavailable(Exception):
    """Why this machine cannot run the cluster (the test skips, giving this reason)."""


@dataclass(frozen=True)
class Cluster:
    root: Path
    conf: Path

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, squeue) needs to talk to this cluster; jobs inherit it."""
        return {"SLURM_CONF": str(self.conf)}


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=SBIN)


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _conf(root: Path, host: str, cpus: int) -> str:
    return "\n".join([
        "ClusterName=gradertest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={root}/munge/socket",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd.log",
        f"PlugStackConfig={root}/plugstack.conf",
        # No cgroups, no accounting database: what a container or a laptop has.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "MinJobAge=3600",  # a finished job stays in `scontrol show job` for its state and exit code
        # The node has the CPUs and memory this file says, not the machine's: a script's own
        # --cpus-per-task and --mem are then accepted on a small test machine.
        "SlurmdParameters=config_overrides",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=65536 State=UNKNOWN",
        "PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def log_tail(root: Path, lines: int = 8) -> str:
    parts = []
    for log in [*sorted((root / "log").glob("*.log")), root / "munge" / "munged.log"]:
        if log.exists():
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            parts.append(f"{log.name}: " + " | ".join(tail))
    return "; ".join(parts)


def _stop_pidfile(path: Path) -> None:
    try:
        os.kill(int(path.read_text(encoding="utf-8").strip()), 15)
    except (OSError, ValueError):
        pass


def _start(root: Path, conf: Path) -> None:
    munge = root / "munge"
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    started = _run(_tool("munged") or "munged", "--force", f"--socket={munge}/socket", f"--key-file={key}",
                   f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
                   f"--seed-file={munge}/munged.seed")
    if started.returncode != 0:
        raise SlurmUnavailable(f"munged did not start: {started.stderr.strip()} {log_tail(root)}")
    env = {"SLURM_CONF": str(conf)}
    for daemon in ("slurmctld", "slurmd"):
        started = _run(_tool(daemon) or daemon, "-f", str(conf), env=env)
        if started.returncode != 0:
            raise SlurmUnavailable(f"{daemon} did not start: {started.stderr.strip()} {log_tail(root)}")
    deadline = time.monotonic() + START_WAIT_S
    while (state := _run("sinfo", "-h", "-o", "%T", env=env).stdout.strip()) != "idle":
        if time.monotonic() > deadline:
            raise SlurmUnavailable(f"the node did not become idle in {START_WAIT_S} s (state {state!r}): "
                                   f"{log_tail(root)}")
        time.sleep(0.5)


@contextmanager
def slurm_cluster(cpus: int = 8) -> Iterator[Cluster]:
    missing = [name for name in DAEMONS + CLIENTS if _tool(name) is None]
    if missing:
        raise SlurmUnavailable(f"Slurm is not installed ({', '.join(missing)} missing): "
                               "apt-get install -y slurmctld slurmd munge slurm-client")
    if os.geteuid() != 0:
        raise SlurmUnavailable("slurmd runs each job as its user, so a private cluster needs root")
    # A short path: munge's socket must fit in a unix socket address (108 bytes).
    root = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    conf = root / "slurm.conf"
    try:
        for sub in ("munge", "state", "spool", "log"):
            (root / sub).mkdir()
        root.chmod(0o755)
        (root / "munge").chmod(0o755)  # munged wants its socket's folder open to every user
        (root / "plugstack.conf").write_text("", encoding="utf-8")
        conf.write_text(_conf(root, socket.gethostname().split(".")[0], cpus), encoding="utf-8")
        _start(root, conf)
        yield Cluster(root, conf)
    finally:
        env = {"SLURM_CONF": str(conf)}
        if _tool("scontrol"):
            _run("scancel", "--user", str(os.geteuid()), env=env, timeout=30)
            _run("scontrol", "shutdown", env=env, timeout=30)
        for pid_file in (root / "slurmctld.pid", root / "slurmd.pid", root / "munge" / "munged.pid"):
            _stop_pidfile(pid_file)
        time.sleep(0.5)
        shutil.rmtree(root, ignore_errors=True)
