"""Fixtures ex5's checks share (grader/checks/conftest.py has every check's)."""

from __future__ import annotations

import pytest

from grader.checks.ex5_amp.workload import Earlier


@pytest.fixture(scope="session")
def earlier() -> Earlier:
    """What this grading's earlier ex5 checks saw (``Earlier``): one for the judge process, which grades one
    learner."""
    return Earlier()
