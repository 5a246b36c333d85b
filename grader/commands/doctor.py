"""``grader doctor`` and ``grader.doctor()``: what someone needs to report a problem with the grader, checked for real.

It asks a fresh interpreter, started the way a grading child is (same environment, same
``PYTHONPATH``), what it has: the packages the grader declares, torch and its devices, and
whether every check module imports. So a broken install (a package missing from the venv, a
check that does not import) shows here exactly as it would break grading, in one line each.
The grader's own process never imports torch, here either.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader import __version__
from grader.course import Course, load_course
from grader.errors import GraderError
from grader.paths import CHECKS_DIR, PACKAGE_DIR, PROJECT_ROOT
from grader.run.isolation import probe as probe_isolation
from grader.run.launch import writes_bytecode
from grader.run.sandbox import base_env

# Distribution name -> the module the grader imports from it (pyproject.toml's dependencies).
PACKAGES = {"torch": "torch", "numpy": "numpy", "pytest": "pytest", "pytest-timeout": "pytest_timeout",
            "pyyaml": "yaml", "nbformat": "nbformat", "tqdm": "tqdm"}
PROBE_TIMEOUT_S = 180

# Runs in the fresh interpreter; prints one JSON object. Each part is tried on its own, so one
# missing package does not hide what else is there.
_PROBE = r"""
import importlib, importlib.metadata, json, pathlib, sys
packages, checks, torch_info = {}, {}, {}
for dist, module in PACKAGES.items():
    try:
        importlib.import_module(module)
        packages[dist] = importlib.metadata.version(dist)
    except Exception as exc:
        packages[dist] = None
        packages[dist + ":error"] = f"{type(exc).__name__}: {exc}"
try:
    import torch
    mps = getattr(torch.backends, "mps", None)
    torch_info = {"version": torch.__version__, "cuda_built": torch.version.cuda,
                  "cuda": torch.cuda.is_available(), "mps": bool(mps is not None and mps.is_available())}
    if torch_info["cuda"]:
        torch_info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
except Exception as exc:
    torch_info = {"error": f"{type(exc).__name__}: {exc}"}
for path in sorted(pathlib.Path(CHECKS_DIR).glob("*/test_*.py")) + [pathlib.Path(CHECKS_DIR) / "test_canary.py"]:
    name = "grader.checks." + ".".join(path.relative_to(CHECKS_DIR).with_suffix("").parts)
    try:
        importlib.import_module(name)
        checks[name] = ""
    except Exception as exc:
        checks[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"packages": packages, "torch": torch_info, "checks": checks}))
"""


@dataclass(frozen=True)
class Finding:
    label: str
    text: str
    ok: bool = True


def probe() -> dict[str, object]:
    """What a grading child's interpreter has; ``{"error": ...}`` when it cannot even start."""
    code = f"PACKAGES = {PACKAGES!r}\nCHECKS_DIR = {str(CHECKS_DIR)!r}\n{_PROBE}"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base_env(),
                              cwd=PROJECT_ROOT, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    try:
        found: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
        return found
    except (ValueError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return {"error": tail[-1] if tail else f"exit code {proc.returncode}"}


def auto_device(torch_info: dict[str, object]) -> str:
    """What ``--device auto`` grades accelerator checks on, in words."""
    if torch_info.get("cuda"):
        names = torch_info.get("cuda_devices") or ["?"]
        return f"cuda ({names[0]})"  # type: ignore[index]
    if torch_info.get("mps"):
        return "mps (Apple GPU)"
    return "no accelerator: the CPU stand-in (accelerator checks emulated on the CPU; see the report's modes)"


def findings(course: Course | None, course_error: str = "") -> list[Finding]:
    found = [
        Finding("grader", f"{__version__} ({PACKAGE_DIR})"),
        Finding("python", f"{platform.python_version()} ({sys.executable})"),
        Finding("platform", platform.platform()),
    ]
    if course is not None:
        counts = f"{len(course.exercises)} exercises, {len(course.checks)} checks"
        found.append(Finding("course", f"{course.path} ({counts})"))
    else:
        found.append(Finding("course", course_error, ok=False))
    info = probe()
    if "error" in info:
        found.append(Finding("interpreter", f"a grading interpreter cannot start: {info['error']}", ok=False))
        return found + [Finding(f"sandbox: {name}", text, ok) for name, (ok, text) in sandbox_features().items()]
    packages: dict[str, str | None] = info["packages"]  # type: ignore[assignment]
    for dist in PACKAGES:
        version = packages.get(dist)
        found.append(Finding(f"package {dist}", version or f"MISSING ({packages.get(dist + ':error')})",
                             ok=version is not None))
    torch_info: dict[str, object] = info["torch"]  # type: ignore[assignment]
    if "error" in torch_info:
        found.append(Finding("torch", str(torch_info["error"]), ok=False))
    else:
        built = f"built with CUDA {torch_info['cuda_built']}" if torch_info.get("cuda_built") else "CPU build"
        found.append(Finding("torch", f"{torch_info['version']} ({built}); CUDA available: {torch_info['cuda']}; "
                                      f"MPS available: {torch_info['mps']}"))
        found.append(Finding("--device auto", auto_device(torch_info)))
    checks: dict[str, str] = info["checks"]  # type: ignore[assignment]
    broken = {name: error for name, error in checks.items() if error}
    found.append(Finding("checks", f"{len(checks)} check modules import" if not broken else
                         "; ".join(f"{name}: {error}" for name, error in broken.items()), ok=not broken))
    found += [Finding(f"sandbox: {name}", text, ok) for name, (ok, text) in sandbox_features().items()]
    return found + [bytecode()]


def _compiled(source: Path) -> bool:
    """Whether Python would read ``source``'s cached bytecode rather than compile it: the cache's magic number
    and the source's modification time and size in its header (importlib's own check, for timestamp caches)."""
    try:
        with open(importlib.util.cache_from_source(str(source)), "rb") as cache:
            header = cache.read(16)
        stat = source.stat()
    except OSError:
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags & 0b01:  # a hash-based cache (py_compile makes them where SOURCE_DATE_EPOCH is set)
        unchecked = not flags & 0b10
        return unchecked or header[8:16] == importlib.util.source_hash(source.read_bytes())
    return (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def bytecode() -> Finding:
    """Whether the grader's own modules are compiled: every process of a grading imports them, and the grader
    writes their bytecode before it starts any (grader/run/launch.py ``compile_ahead``) — except where its
    Python may not (``PYTHONDONTWRITEBYTECODE``, common in CI images and Dockerfiles) or cannot (a read-only
    install) write it. Then each of those processes compiles them in memory again: +0.3 CPU-s a `grader
    grade`, measured (docs/performance.md, twentieth session). Not a problem, a cost, with its one-line cure."""
    sources = sorted(PACKAGE_DIR.rglob("*.py"))
    stale = [source for source in sources if not _compiled(source)]
    if not stale:
        return Finding("bytecode", f"compiled: the grader's {len(sources)} modules")
    count = f"{len(stale)} of the grader's {len(sources)} modules not compiled"
    if writes_bytecode():
        return Finding("bytecode", f"{count} yet: the next grading writes them")
    why = "PYTHONDONTWRITEBYTECODE is set" if sys.dont_write_bytecode else "the grader's folder is read-only here"
    return Finding("bytecode", f"{count} ({why}): each process of every grading compiles them again in memory "
                               f"(~0.3 CPU-s a `grader grade` when none is compiled); "
                               f"`{shlex.quote(sys.executable)} -m compileall -q {shlex.quote(str(PACKAGE_DIR))}` "
                               "writes them once")


def render(found: list[Finding]) -> str:
    width = max(len(f.label) for f in found)
    lines = [f"{'  ' if f.ok else '✗ '}{f.label:<{width}}  {f.text}" for f in found]
    broken = [f for f in found if not f.ok]
    lines.append("")
    lines.append("everything the grader needs works here" if not broken else
                 f"{len(broken)} problem(s) above: reinstall the grader (pip install -e . or the course's install "
                 "line) and run `grader doctor` again; include this output when you report a problem")
    return "\n".join(lines)


def diagnose(course_path: Path | None = None) -> tuple[str, bool]:
    """The whole diagnosis as text, and whether everything the grader needs works."""
    try:
        course, problem = load_course(course_path), ""
    except GraderError as exc:
        course, problem = None, str(exc)
    found = findings(course, problem)
    return render(found), all(f.ok for f in found)


def sandbox_features() -> dict[str, tuple[bool, str]]:
    """What the sandbox can use on this machine: name -> (works, in words), for ``grader doctor``."""
    features: dict[str, tuple[bool, str]] = {}
    limits = [name for name in ("RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_FSIZE") if hasattr(resource, name)]
    features["resource limits"] = (len(limits) == 3, ", ".join(limits) or "none")
    proc_ok = os.path.isdir(f"/proc/{os.getpid()}") and os.access(f"/proc/{os.getpid()}/environ", os.R_OK)
    features["process tracking"] = (proc_ok, "/proc readable: every process of a run is found and killed" if proc_ok
                                    else "no /proc: only the learner process's session is killed")
    fork = sys.platform == "linux"
    isolation = probe_isolation()
    if not fork:
        features["fork server"] = (True, "not on this platform: processes are exec'd (slower, same results)")
    elif isolation.learners_fork:
        features["fork server"] = (True, "available (grader batch forks its processes from warm servers)")
    else:
        features["fork server"] = (True, f"judges only: {isolation.fork_refused}, so each learner process is "
                                         "exec'd in a sandbox of its own and imports torch itself (same results, "
                                         "more CPU a learner)")
    if isolation.mode == "bwrap":
        forked = "; forked processes isolated too" if fork and isolation.forks else ""
        how = f"bubblewrap ({isolation.bwrap}){forked}"
        features["isolation"] = (True, how + "".join(f"; missing: {m}" for m in isolation.missing))
    else:
        features["isolation"] = (True, "none: learner code runs beside the grader, unisolated (missing: "
                                        + "; ".join(isolation.missing) + ")")
    return features
