"""Exercise 2, public checks: time_matmul returns seconds; the multiple-choice answer."""

from __future__ import annotations

import torch

from grader.checks.support.learner import LearnerModule
from grader.checks.support.outcomes import NotAttempted, fail
from grader.checks.support.trusted import is_number

CHOICES = "ABCD"
# A 512x512 float32 matmul on this 2-core CPU: 2.5 ms warm, 7 ms cold, 10 ms at load 4.5
# (measured). Anything from 0 to 1 s is a time in seconds; a time in milliseconds reads
# >= 2.5, so a learner who returns ms is caught with a 100x margin either way.
N = 512
MAX_SECONDS = 1.0


def test_time_matmul_returns_seconds(ex2: LearnerModule, cpu: torch.device) -> None:
    seconds = ex2.time_matmul(N, cpu, repeats=2)
    if isinstance(seconds, torch.Tensor) or not is_number(seconds):
        fail("ex2.not_seconds", got=repr(seconds)[:60])
    if not 0 < float(seconds) < MAX_SECONDS:
        fail("ex2.implausible_seconds", got=seconds)


def test_small_n_answer(ex2: LearnerModule) -> None:
    answer = ex2.value("SMALL_N_ANSWER")
    if not isinstance(answer, str) or not answer.strip():
        raise NotAttempted("SMALL_N_ANSWER")
    letter = answer.strip().upper().rstrip(").")
    if letter not in CHOICES:
        fail("ex2.answer_not_letter", got=answer[:20])
    if letter != "B":
        fail("ex2.wrong_answer", got=letter)
