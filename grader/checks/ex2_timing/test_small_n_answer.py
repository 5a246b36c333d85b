"""ex2.small_n_answer: the multiple-choice answer — why a GPU is slower for N = 100 (public)."""

from __future__ import annotations

import re

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
# A choice letter standing alone: not beside another letter or digit ("B", "(B)", "B) overhead…", "Đáp án: B").
_MARK = re.compile(r"(?<![^\W_])[A-D](?![^\W_])")


def chosen(answer: str) -> str | None:
    """The one choice an answer names, or None when it names none or several. The stub asks for one letter; an
    answer that copies its option line ("B) kernel-launch … overhead …"), brackets it ("(b)") or says it in a
    sentence ("Đáp án: B") names B as well. The marks are the capital letters A-D that stand alone, and a first
    letter that stands alone in either case ("b) …"); two different ones ("B or C") are no answer."""
    text = answer.strip()
    marks = set(_MARK.findall(text))
    first = re.match(r"[\W_]*([A-Da-d])(?![^\W_])", text)
    if first is not None:
        marks.add(first.group(1).upper())
    return marks.pop() if len(marks) == 1 else None


def test_small_n_answer(ex2: LearnerModule) -> None:
    answer = ex2.value("SMALL_N_ANSWER")
    if not isinstance(answer, str) or not answer.strip():
        raise NotAttempted("SMALL_N_ANSWER")
    letter = chosen(answer)
    if letter is None:
        fail("ex2.answer_not_letter", got=answer[:20])
    if letter != "B":
        fail("ex2.wrong_answer", got=letter)
