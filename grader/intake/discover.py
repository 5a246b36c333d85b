"""A batch's learners: every entry directly in the submissions folder, and the hashes a re-run
compares to decide whom to regrade (the submission's content; the course, its checks and texts).

Any name the folder holds is a learner, under an id of grader/intake/names.py (unique, stable,
safe wherever it is written); nothing here follows a symbolic link or opens what is not a regular
file. Tools' own entries (``.git``, ``.DS_Store``, ``__pycache__``, ``.ipynb_checkpoints``) are
skipped, and said to be.
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
from grader.intake.names import class_ids, shown, submitted_as
from grader.intake.submission import IGNORED_NAMES, SUFFIXES, folder_entries
from grader.paths import CHECKS_DIR, TEXTS_DIR

_CHUNK = 1 << 20
# A learner's file is copied into their staged folder only up to this size: a notebook with its
# outputs is a few MiB; anything larger is not an answer to these exercises.
MAX_STAGED_BYTES = 64 << 20


@dataclass(frozen=True)
class Learner:
    id: str  # safe, unique, stable (grader/intake/names.py): names the report and the gradebook row
    path: Path
    submitted_as: str  # the entry's name as the learner gave it, shown


def discover(folder: Path, *, skip: Path | None = None) -> list[Learner]:
    """Every file, folder or link directly in ``folder`` (but ``skip``, an output folder inside
    it), sorted by learner id. A hidden entry is a learner only when it looks like a submission
    (``.name.py``, ``.name.ipynb``, or a folder holding either); the others are tools' files."""
    if not folder.is_dir():
        raise GraderError(f"submissions folder not found: {folder}")
    found: list[tuple[str, bool, Path]] = []
    for entry in sorted(os.scandir(folder), key=lambda entry: entry.name):
        path = Path(entry.path)
        if entry.name in IGNORED_NAMES or (skip is not None and _same(path, skip)):
            continue
        link, is_dir = entry.is_symlink(), entry.is_dir(follow_symlinks=False)
        if not (link or is_dir or entry.is_file(follow_symlinks=False)):
            print(f"grader: skipping {shown(entry.name)}: not a file or folder", file=sys.stderr)
            continue
        if entry.name.startswith(".") and not _looks_submitted(entry):
            print(f"grader: skipping {shown(entry.name)}: hidden, and not a .py, a .ipynb or a folder of them",
                  file=sys.stderr)
            continue
        found.append((entry.name, is_dir, path))
    ids = class_ids((name, is_dir) for name, is_dir, _ in found)
    learners = [Learner(ids[name], path, submitted_as(name)) for name, _, path in found]
    return sorted(learners, key=lambda learner: learner.id)


def _same(path: Path, other: Path) -> bool:
    try:
        return path.resolve() == other.resolve()
    except OSError:
        return False


def _looks_submitted(entry: os.DirEntry[str]) -> bool:
    """A hidden entry that is nonetheless a submission: a notebook or a .py, or a folder holding one."""
    if not entry.is_dir(follow_symlinks=False):
        return os.path.splitext(entry.name)[1].lower() in SUFFIXES
    try:
        return any(os.path.splitext(inner.name)[1].lower() in SUFFIXES for inner in folder_entries(Path(entry.path)))
    except OSError:
        return False


def _feed_file(digest: Any, label: str, path: Path) -> None:
    """Hash a name and a file's bytes; never follows a link (its target's path is hashed instead)
    and never opens what is not a regular file (a FIFO would block)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        mode = 0
    digest.update(label.encode("utf-8", "surrogateescape") + b"\0")
    if stat.S_ISLNK(mode):
        digest.update(b"link\0" + os.fsencode(os.readlink(path)))
        return
    if not stat.S_ISREG(mode):
        digest.update(b"not-a-regular-file\0")
        return
    content = hashlib.sha256()
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as data:
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
    if path.is_dir() and not path.is_symlink():
        for entry in folder_entries(path):
            if not entry.name.startswith(".") and entry.name not in IGNORED_NAMES and not entry.is_dir(
                    follow_symlinks=False):
                _feed_file(digest, entry.name, Path(entry.path))
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
