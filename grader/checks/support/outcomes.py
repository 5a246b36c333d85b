"""How a check ends other than by passing. The child's plugin turns these into results.

Checks call ``fail("ex3.not_assigned", got=...)``: the message id is looked up in
grader/messages/<lang>.yaml by the parent, so checks never hold learner-facing text.
"""

from __future__ import annotations

from typing import Any, NoReturn


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
    """The learner's code raised; ``where`` points into the learner's own file."""

    def __init__(self, exc: BaseException, where: str, during: str) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.exc_text = f"{type(exc).__name__}: {str(exc).strip()[:400]}"
        self.where = where
        self.during = during


def fail(message_id: str, **params: Any) -> NoReturn:
    raise CheckFailed(message_id, **params)
