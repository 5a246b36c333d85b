"""Where the grader's own files are: the one module that derives paths from ``__file__``.

Every process imports it (the learner process, inside its sandbox, finds the package at the
read-only view grader/run/isolation.py binds; the judge and the grader where it is installed),
and each gets the paths of the copy it runs from. Standard library only.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # grader/
# What holds the package: the checkout of an editable install, or site-packages. The processes
# the grader starts put it on PYTHONPATH (grader/run/sandbox.py), and bubblewrap binds the
# learner's part of the package from it (grader/run/isolation.py).
PROJECT_ROOT = PACKAGE_DIR.parent
CHECKS_DIR = PACKAGE_DIR / "checks"  # the judge's pytest rootdir: one module per check
TEXTS_DIR = PACKAGE_DIR / "score" / "texts"  # the grader's own learner-facing texts, vi.yaml and en.yaml


def package_file(relative: str) -> Path:
    """A file or folder of the package, from its path relative to ``grader/`` (grader/layout.py)."""
    return PACKAGE_DIR / relative
