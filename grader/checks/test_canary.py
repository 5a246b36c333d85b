"""A check that must fail. If it comes back passed, the learner's code tampered with pytest."""

from grader.judge.api import fail


def test_canary() -> None:
    fail("canary")
