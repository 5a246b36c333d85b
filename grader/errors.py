"""The one error type users see, and the exit codes of the command line.

A learner's broken code is never a GraderError: it is a result in the report.
GraderError is for the person running the grader (a missing path, a bad course.yaml).
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # a report was written, whatever the score
    BELOW_FAIL_UNDER = 1  # --fail-under PCT and the score is below it
    USAGE = 2  # bad arguments, missing path, invalid course.yaml
    INTERNAL = 3  # a bug in the grader; a zero-score report with the reason is still written


class GraderError(Exception):
    """A problem the user can fix; the CLI prints it without a traceback."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
