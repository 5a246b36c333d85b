"""The one error type users see, and the exit codes of the command line.

A learner's broken code is never a GraderError: it is a result in the report.
GraderError is for the person running the grader (a missing path, a bad course.yaml).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from grader.wire.messages import GraderFailureKind


class ExitCode(enum.IntEnum):
    OK = 0  # a report was written, whatever the score
    BELOW_FAIL_UNDER = 1  # --fail-under PCT and the score is below it
    USAGE = 2  # bad arguments, missing path, invalid course.yaml
    INTERNAL = 3  # the grader itself failed (a bug, a broken install); a report with the reason is still written


class GraderError(Exception):
    """A problem the user can fix; the CLI prints it without a traceback."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class GraderFailure:
    """The grader's own environment or code failed: no verdict on the learner's code."""

    kind: GraderFailureKind
    error: str  # one line: "ModuleNotFoundError: No module named 'numpy'"


def error_line(text: str, limit: int = 200) -> str:
    """The line of an error report that names the cause: pytest's last ``E   `` line, else
    the last non-empty line (a traceback's ``ModuleNotFoundError: ...``)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    marked = [line[1:].strip() for line in lines if line.startswith("E ")]
    found = (marked or lines or [""])[-1]
    return found if len(found) <= limit else found[: limit - 1] + "…"
