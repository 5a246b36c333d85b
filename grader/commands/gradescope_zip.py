"""The Gradescope autograder package: ``grader release --gradescope -o autograder.zip``.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once to build the
image, then ``run_autograder`` once per submission. The zip holds:

- ``setup.sh``: a venv in ``/opt/grader`` with the packages this grader was tested with, pinned
  (``requirements.txt``; torch as a CPU build from PyTorch's index unless ``--gpu``), then the
  grader itself from the zip, then ``grader doctor`` so a broken image fails the build, not
  the learners;
- ``run_autograder``: ``grader autograde`` (grader/outputs/gradescope.py), and a results.json that says
  "the autograder could not run" when even Python cannot start;
- the course: ``course.yaml`` without solution paths, the stubs, and the grader package with
  every check (public and hidden: Gradescope grades both) and its messages.

No solution is in it; the build checks that before writing the zip.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import stat
import sys
import zipfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path
from typing import Any

from grader import __version__, yamltext
from grader.course import Course
from grader.errors import GraderError
from grader.outputs.gradescope import unavailable_results
from grader.paths import PACKAGE_DIR

DISTRIBUTION = "pytorch-gpu-lesson-grader"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
EXECUTABLE = 0o755

SETUP_SH = """\
#!/usr/bin/env bash
# Written by `grader release --gradescope` (grader {version}). Gradescope runs this once, to build
# the autograder's image. GRADER_VENV and GRADER_TORCH_INDEX are for testing the package elsewhere.
set -euo pipefail
source_dir="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
venv="${{GRADER_VENV:-/opt/grader}}"
torch_index="${{GRADER_TORCH_INDEX-{torch_index}}}"  # empty: torch from the package index alone
# The pinned packages need at least the Python they were tested with ({python}); Gradescope's
# Ubuntu 22.04 image has 3.10, so that one gets python{python} from Ubuntu's own packages.
python=""
for candidate in python3 python{python} python3.12 python3.13; do
    if command -v "$candidate" >/dev/null \\
            && "$candidate" -c "import sys; sys.exit(sys.version_info < ({major}, {minor}))"; then
        python="$candidate"
        break
    fi
done
if [ -z "$python" ]; then
    apt-get update && apt-get install -y --no-install-recommends "python{python}" "python{python}-venv"
    python="python{python}"
fi
if ! "$python" -c "import ensurepip, venv" 2>/dev/null; then
    found="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    apt-get update && apt-get install -y --no-install-recommends "python$found-venv"
fi
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --no-cache-dir ${{torch_index:+--extra-index-url "$torch_index"}} \\
    -r "$source_dir/requirements.txt"
"$venv/bin/python" -m pip install --no-cache-dir --no-deps "$source_dir"
"$venv/bin/grader" doctor --course "$source_dir/course.yaml"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Written by `grader release --gradescope` (grader {version}). Gradescope runs this once per
# submission: the learner's files are in /autograder/submission, results go to
# /autograder/results/results.json. AUTOGRADER_ROOT and GRADER_VENV are for testing elsewhere.
set -uo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
venv="${{GRADER_VENV:-/opt/grader}}"
mkdir -p "$root/results"
"$venv/bin/grader" autograde --root "$root" --course "$root/source/course.yaml" --lang {lang}
code=$?
# Whatever happened, the learner gets a page: when the grader could not even write one (Python
# or the install is broken), this one says so.
if ! "$venv/bin/python" -c 'import json, sys; json.load(open(sys.argv[1]))' "$root/results/results.json" \\
        2>/dev/null; then
    cat > "$root/results/results.json" <<'JSON'
{fallback}
JSON
fi
echo "grader exit code: $code" >&2
exit 0
"""

README = """\
# Gradescope autograder for {title}

Written by `grader release --gradescope` (grader {version}). Upload this zip as the
assignment's autograder; `setup.sh` builds the image, `run_autograder` grades each submission.
"""


@dataclass(frozen=True)
class Package:
    path: Path
    files: int
    checks: int
    requirements: tuple[str, ...]


def build(course: Course, out: Path, *, gpu: bool = False) -> Package:
    if course.release is not None:
        raise GraderError(f"{course.path} is a learner's copy (release: public): "
                          "the Gradescope package needs the full course")
    if out.suffix.lower() != ".zip":
        raise GraderError(f"{out}: the Gradescope package is a .zip file (-o autograder.zip)")
    if out.exists():
        raise GraderError(f"{out} exists; choose a new file or remove it")
    root = course.path.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        raise GraderError(f"{pyproject} is missing: the package installs the grader from it")
    pins = pinned_requirements()
    files = _files(course, pyproject, pins, gpu)
    _refuse_solutions(course, files)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, mode) in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    partial.replace(out)
    return Package(out, len(files), len(course.checks), pins)


def pinned_requirements() -> tuple[str, ...]:
    """The grader's own dependencies at the versions installed here, the ones it was tested with."""
    try:
        declared = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        raise GraderError(f"the grader is not installed as {DISTRIBUTION} (pip install -e .): "
                          "the package pins the versions it was installed with") from None
    pins = []
    for requirement in declared:
        if "extra ==" in requirement:
            continue
        spec, _, marker = requirement.partition(";")
        name = re.match(r"[A-Za-z0-9._-]+", spec.strip())
        if name is None:
            continue
        try:
            installed = version(name.group(0))
        except PackageNotFoundError:
            raise GraderError(f"{name.group(0)} is declared but not installed here; reinstall the grader") from None
        public = installed.split("+", 1)[0]  # torch's "2.13.0+cpu": the index picks the build
        pins.append(f"{name.group(0)}=={public}" + (f"; {marker.strip()}" if marker else ""))
    return tuple(pins)


def _files(course: Course, pyproject: Path, pins: tuple[str, ...], gpu: bool) -> dict[str, tuple[bytes, int]]:
    lang = course.default_lang
    fallback = unavailable_results(lang, "run_autograder: the grader did not start")
    texts: dict[str, str] = {
        "setup.sh": SETUP_SH.format(version=__version__, torch_index="" if gpu else CPU_TORCH_INDEX,
                                    python="{}.{}".format(*sys.version_info[:2]), major=sys.version_info[0],
                                    minor=sys.version_info[1]),
        "run_autograder": RUN_AUTOGRADER.format(version=__version__, lang=lang,
                                                fallback=json.dumps(fallback, ensure_ascii=False)),
        "requirements.txt": (f"# the versions grader {__version__} was tested with, on Python "
                             f"{platform.python_version()}\n" + "\n".join(pins) + "\n"),
        "course.yaml": _course_yaml(course),
        "README.md": README.format(title=course.title["en"], version=__version__),
        "pyproject.toml": pyproject.read_text(encoding="utf-8"),
    }
    files = {name: (text.encode("utf-8"), EXECUTABLE if name in ("setup.sh", "run_autograder") else 0o644)
             for name, text in texts.items()}
    for ex in course.exercises:
        if ex.stub is not None:
            files[f"exercises/{ex.stub.name}"] = (ex.stub.read_bytes(), 0o644)
    for path in sorted(PACKAGE_DIR.rglob("*")):
        relative = path.relative_to(PACKAGE_DIR)
        if path.is_file() and "__pycache__" not in relative.parts and path.suffix in (".py", ".yaml", ".ini"):
            files[f"grader/{relative.as_posix()}"] = (path.read_bytes(), 0o644)
    return files


def _course_yaml(course: Course) -> str:
    """The full course, every check, with stub paths inside the zip and no solution paths."""
    raw: dict[str, Any] = yamltext.load(course.path.read_text(encoding="utf-8"))
    for ex in raw["exercises"]:
        ex.pop("solution", None)
        if "stub" in ex:
            ex["stub"] = f"exercises/{Path(ex['stub']).name}"
    header = f"# Written by `grader release --gradescope` (grader {__version__}) from {course.path.name}.\n"
    return header + yamltext.dump(raw)


def _refuse_solutions(course: Course, files: dict[str, tuple[bytes, int]]) -> None:
    """No solution file, and no solution's body, anywhere in the package."""
    bodies = [ex.solution.read_bytes() for ex in course.exercises if ex.solution is not None]
    for name, (data, _) in files.items():
        if name.startswith("solutions/") or any(body.strip() and body.strip() in data for body in bodies):
            raise GraderError(f"the Gradescope package would hold a solution ({name}); not written")


def unpack(package: Path, target: Path) -> None:
    """Unzip as Gradescope does, keeping the scripts executable (tests and instructors' dry runs)."""
    with zipfile.ZipFile(package) as archive:
        for info in archive.infolist():
            path = target / info.filename
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, path.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            path.chmod((info.external_attr >> 16) & 0o777 or 0o644)

