"""Every check fails on a realistic wrong submission, with the message that names the mistake.

Each file in tests/submissions/mistakes/<module>/ and tests/submissions/idioms/mistakes/<module>/
is a whole exercise with one mistake and a header: ``# fails:`` the checks that must lose points
(exactly those), ``# message:`` the message id the first of them must show. The grader runs for real,
on the whole catalog at once, as ``grader batch`` grades a class (tests/conftest.py, graded_class).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from grader.course import load_course
from tests.conftest import MODULES, Graded
from tests.submissions.catalog import Mistake, mistakes

MISTAKES = mistakes()


def test_catalog_covers_every_check() -> None:
    declared = {check for mistake in MISTAKES for check in mistake.fails}
    assert {c.id for c in load_course().checks} - declared == set()


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.name)
def test_mistake_loses_exactly_its_checks(mistake: Mistake, graded_class: Callable[[str], Graded]) -> None:
    graded = graded_class(f"mistake__{mistake.name.replace('/', '__')}")
    assert graded.report is not None
    lost = [(c["id"], c["status"], c["message"]) for c in graded.exercise(mistake.exercise)["checks"]
            if c["status"] != "passed"]
    assert graded.lost(mistake.exercise) == set(mistake.fails), lost
    message = graded.check(mistake.fails[0])["message"]
    assert mistake.message_prefix() in message, message
    others = [ex for ex in MODULES if ex != mistake.exercise]
    assert all(graded.exercise(ex)["status"] == "not_attempted" for ex in others)
