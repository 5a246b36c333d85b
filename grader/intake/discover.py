"""A batch's learners: every entry directly in the submissions folder, and the hashes a re-run
compares to decide whom to regrade (the submission's content; the course, its checks and texts).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.course import Course
from grader.errors import GraderError
from grader.intake.submission import IGNORED_NAMES
from grader.paths import CHECKS_DIR, TEXTS_DIR

_CHUNK = 1 << 20
# A learner's file is copied into their staged folder only up to this size: a notebook with its
# outputs is a few MiB; anything larger is not an answer to these exercises.
MAX_STAGED_BYTES = 64 << 20


@dataclass(frozen=True)
class Learner:
    name: str  # the submission's name without its extension
    path: Path


def discover(folder: Path, reserved: frozenset[str] = frozenset()) -> list[Learner]:
    """Every file or folder directly in ``folder``, sorted by learner name; a learner named as one
    of the class files (``reserved``) is an error."""
    if not folder.is_dir():
        raise GraderError(f"submissions folder not found: {folder}")
    by_name: dict[str, list[Path]] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name in IGNORED_NAMES:
            continue
        if not (entry.is_dir() or entry.is_file()):
            print(f"grader: skipping {entry}: not a file or folder", file=sys.stderr)
            continue
        name = entry.stem if entry.is_file() else entry.name
        by_name.setdefault(name, []).append(entry)
    for name, paths in by_name.items():
        if len(paths) > 1:
            listed = ", ".join(p.name for p in paths)
            raise GraderError(f"{folder}: {listed} are all submissions of learner {name!r}; keep one")
        if name in reserved:
            raise GraderError(f"{paths[0]}: the learner name {name!r} is reserved for the class files "
                              f"({', '.join(sorted(reserved))}); rename the submission")
    return [Learner(name, paths[0]) for name, paths in sorted(by_name.items())]


def _feed_file(digest: Any, label: str, path: Path) -> None:
    """Hash a name and a file's bytes; never opens what is not a regular file (a FIFO would block)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    digest.update(label.encode("utf-8", "surrogateescape") + b"\0")
    if not stat.S_ISREG(mode):
        digest.update(b"not-a-regular-file\0")
        return
    content = hashlib.sha256()
    try:
        with open(path, "rb") as data:
            while chunk := data.read(_CHUNK):
                content.update(chunk)
    except OSError as exc:  # grading will meet the same error and report it
        content = hashlib.sha256(f"unreadable: {exc.errno}".encode())
    digest.update(content.digest())


def _tree_files(root: Path) -> list[tuple[str, Path]]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in IGNORED_NAMES)
        for name in filenames:
            if not name.startswith("."):
                path = Path(dirpath) / name
                files.append((path.relative_to(root).as_posix(), path))
    return sorted(files)


def submission_sha256(path: Path) -> str:
    """The submission's content: a file's name and bytes, or those of every file of a folder.

    Only a folder's own files count, not its subfolders: they are all the loader can read
    (grader/intake/submission.py), and a learner's folder that links to a large tree costs nothing.
    """
    digest = hashlib.sha256()
    if path.is_dir():
        for file in sorted(path.iterdir()):
            if not file.name.startswith(".") and file.name not in IGNORED_NAMES and not file.is_dir():
                _feed_file(digest, file.name, file)
    else:
        _feed_file(digest, path.name, path)
    return digest.hexdigest()


def course_sha256(course: Course) -> str:
    """What a report depends on besides the submission: course.yaml, the checks, the messages."""
    digest = hashlib.sha256()
    _feed_file(digest, "course.yaml", course.path)
    for base in (CHECKS_DIR, TEXTS_DIR):
        for label, file in _tree_files(base):
            if file.suffix in (".py", ".yaml", ".ini"):
                _feed_file(digest, f"{base.name}/{label}", file)
    return digest.hexdigest()


def stage(sources: Sequence[tuple[Path, str]], folder: Path) -> Path:
    """One learner's submission made of several entries (a Canvas download holds one entry per
    uploaded file): copies of each entry's regular files, under the names given, in ``folder``
    (emptied first), which the loader then reads as a folder submission.

    A folder entry gives its own files (not its subfolders, as the loader reads a folder); links
    are never followed out of the submissions folder, and a file past ``MAX_STAGED_BYTES`` is left
    out with a line on stderr."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    taken: set[str] = set()
    for source, name in sources:
        files = ([(child, child.name) for child in sorted(source.iterdir())] if source.is_dir()
                 and not source.is_symlink() else [(source, name)])
        for file, wanted in files:
            try:
                info = os.lstat(file)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or wanted.startswith(".") or wanted in IGNORED_NAMES:
                continue
            if info.st_size > MAX_STAGED_BYTES:
                print(f"grader: {file}: left out, larger than {MAX_STAGED_BYTES >> 20} MiB", file=sys.stderr)
                continue
            stem, suffix = os.path.splitext(wanted)
            target, count = wanted, 1
            while target in taken:
                count += 1
                target = f"{stem}-{count}{suffix}"
            taken.add(target)
            shutil.copyfile(file, folder / target, follow_symlinks=False)
    return folder
