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

from grader.course import load_course
from grader.messages import catalog
from tests.conftest import MODULES, Graded
from tests.submissions.catalog import Mistake, mistakes

MISTAKES = mistakes()


def static_prefix(message_id: str) -> str:
    """The message text up to its first placeholder: what every rendering starts with."""
    return catalog("en")["messages"][message_id].split("{")[0]


def test_catalog_covers_every_check() -> None:
    declared = {check for mistake in MISTAKES for check in mistake.fails}
    assert {c.id for c in load_course().checks} - declared == set()


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.name)
def test_mistake_loses_exactly_its_checks(mistake: Mistake, tmp_path: Path, grade: Callable[..., Graded]) -> None:
    folder = tmp_path / mistake.path.stem
    folder.mkdir()
    shutil.copy(mistake.path, folder / f"{mistake.module}.py")
    graded = grade(folder)
    assert graded.code == 0, graded.stderr
    lost = [(c["id"], c["status"], c["message"]) for c in graded.exercise(mistake.exercise)["checks"]
            if c["status"] != "passed"]
    assert graded.lost(mistake.exercise) == set(mistake.fails), lost
    message = graded.check(mistake.fails[0])["message"]
    assert message.startswith(static_prefix(mistake.message)), message
    others = [ex for ex in MODULES if ex != mistake.exercise]
    assert all(graded.exercise(ex)["status"] == "not_attempted" for ex in others)
