"""ex2.small_n_answer: the multiple-choice answer — why a GPU is slower for N = 100 (public)."""

from __future__ import annotations

from grader.judge.api import LearnerModule, NotAttempted, fail

HINT = {
    "vi": "Đọc lại phần \"Quy luật\" sau speed test: N = 100.",
    "en": "Reread \"Quy luật\" after the speed test: N = 100.",
}
MESSAGES = {
    "ex2.answer_not_letter": {
        "vi": "SMALL_N_ANSWER phải là một chữ cái A, B, C hoặc D, nhận được \"{got}\".",
        "en": "SMALL_N_ANSWER must be one letter A, B, C or D, got \"{got}\".",
    },
    "ex2.wrong_answer": {
        "vi": "SMALL_N_ANSWER = {got} chưa đúng. Hãy nghĩ xem điều gì chiếm phần lớn thời gian khi khối lượng tính "
              "rất nhỏ.",
        "en": "SMALL_N_ANSWER = {got} is not right. Think about what dominates when the work is tiny.",
    },
}
CHOICES = "ABCD"


def test_small_n_answer(ex2: LearnerModule) -> None:
    answer = ex2.value("SMALL_N_ANSWER")
    if not isinstance(answer, str) or not answer.strip():
        raise NotAttempted("SMALL_N_ANSWER")
    letter = answer.strip().upper().rstrip(").")
    if letter not in CHOICES:
        fail("ex2.answer_not_letter", got=answer[:20])
    if letter != "B":
        fail("ex2.wrong_answer", got=letter)
