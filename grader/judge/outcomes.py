"""How a check ends other than by passing. The judge's plugin turns these into results.

Checks call ``fail("ex3.to_not_assigned", got=...)``: the message id names a text that the
check module declares in its ``MESSAGES`` (vi and en, next to the code that fails with it), and
the grader renders it in the report's language, so the judge never needs learner-facing text.
``device=`` (set for a check's failure inside ``with dev:``) makes the message say where.
"""

from __future__ import annotations

from typing import Any, NoReturn

from grader.wire.codec import cut


class CheckFailed(Exception):
    def __init__(self, message_id: str, **params: Any) -> None:
        super().__init__(message_id)
        self.message_id = message_id
        self.params = {k: str(v) for k, v in params.items()}


class NotAttempted(Exception):
    """The learner's function is missing or still raises NotImplementedError."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class LearnerRaised(Exception):
    """The learner's code raised (in the learner process); ``where`` points into the learner's file."""

    def __init__(self, exc_text: str, where: str, during: str, handling: str = "", *,
                 files_full: bool = False) -> None:
        super().__init__(exc_text)
        self.exc_text = cut(exc_text, 400)  # the learner process cuts at 300: this is for one that lies
        self.where = where
        self.during = during
        self.handling = cut(handling, 200)  # raised inside an except block: the exception it was handling
        self.files_full = files_full  # the learner's files had reached the size limit (it chooses the message only)
        self.params: dict[str, str] = {}  # "device": where it happened, when a check ran it on several


class TimedOut(Exception):
    """The learner's function ran past the check's time limit (the learner process interrupted it)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class AlreadyTimedOut(Exception):
    """The learner's function ran past a check's time limit before: later checks are charged at once."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class Tampered(Exception):
    """A figure the learner process reported cannot be true (malformed, out of range, or at odds with
    another observation of the same fact): the learner's code changed the grader's records there.
    The check is the learner's ``error`` and the report is noted ``tampering``. ``message_id`` says what
    cannot be true, in a text of its own as ``fail``'s do: the judge's in grader/score/texts (``tampered.*``),
    a check's in its exercise's MESSAGES; the report's message (``tampered_figure``) holds it as ``{what}``."""

    def __init__(self, message_id: str, **params: Any) -> None:
        super().__init__(message_id)
        self.message_id = message_id
        self.params = {key: cut(str(value), 200) for key, value in params.items()}


class LearnerSideFailed(Exception):
    """The grader's code in the learner process failed after the learner's code ran there: that
    process is untrusted, so this is never the grader's verdict on itself (``grader_internal``)."""


class GraderInternal(Exception):
    """The learner process could not do what a check asked: a bug of the grader's, never the learner's verdict."""


def fail(message_id: str, **params: Any) -> NoReturn:
    raise CheckFailed(message_id, **params)
