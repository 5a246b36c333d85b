"""Every check fails on a realistic wrong submission, with the message that names the mistake.

Each file in tests/submissions/mistakes/<module>/ is a whole exercise with one mistake and a
header: ``# fails:`` the checks that must lose points (exactly those), ``# message:`` the
message id the first of them must show. The grader runs for real on a copy in tmp_path.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.messages import catalog
from tests.conftest import MODULES, STYLES, Graded

MISTAKES = sorted((STYLES / "mistakes").glob("*/*.py"))
EXERCISE_OF = {module: ex for ex, module in MODULES.items()}


def header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text(encoding="utf-8").splitlines()[:3]:
        key, _, value = line.removeprefix("# ").partition(":")
        fields[key.strip()] = value.strip()
    return fields


def static_prefix(message_id: str) -> str:
    """The message text up to its first placeholder: what every rendering starts with."""
    return catalog("en")["messages"][message_id].split("{")[0]


def test_catalog_covers_every_check() -> None:
    declared = {c.strip() for path in MISTAKES for c in header(path)["fails"].split(",")}
    from grader.course import load_course

    assert {c.id for c in load_course().checks} - declared == set()


@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_mistake_loses_exactly_its_checks(path: Path, tmp_path: Path, grade: Callable[..., Graded]) -> None:
    fields = header(path)
    module = path.parent.name
    ex_id = EXERCISE_OF[module]
    expected = {c.strip() for c in fields["fails"].split(",")}
    folder = tmp_path / path.stem
    folder.mkdir()
    shutil.copy(path, folder / f"{module}.py")
    graded = grade(folder)
    assert graded.code == 0, graded.stderr
    assert graded.lost(ex_id) == expected, [
        (c["id"], c["status"], c["message"]) for c in graded.exercise(ex_id)["checks"] if c["status"] != "passed"
    ]
    first = graded.check(sorted(expected, key=lambda c: list(expected).index(c))[0])
    first_declared = fields["fails"].split(",")[0].strip()
    message = graded.check(first_declared)["message"]
    assert message.startswith(static_prefix(fields["message"])), (first["id"], message)
    others = [ex for ex in MODULES if ex != ex_id]
    assert all(graded.exercise(ex)["status"] == "not_attempted" for ex in others)
