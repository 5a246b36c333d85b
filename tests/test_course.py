"""course.yaml is validated on load: one clear error naming the key, the value and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.course import load_course
from grader.errors import GraderError
from tests.conftest import copy_solutions, course_with, run_cli


def test_shipped_course_loads() -> None:
    course = load_course()
    assert course.exercise_ids == ("ex1", "ex2", "ex3", "ex4", "ex5")
    assert sum(ex.max_score for ex in course.exercises) == 100.0
    assert all(ex.max_score == 20.0 for ex in course.exercises)


@pytest.mark.parametrize(("change", "expected"), [
    ({"default_lang: vi": "default_lang: vi\ncolour: blue"}, ["colour", "'blue'", "unknown key"]),
    ({"stub: exercises/ex3_roundtrip.py": "stub: exercises/ex3_missing.py"},
     ["exercises[2].stub", "'exercises/ex3_missing.py'", "does not exist"]),
    ({"{id: small_n_answer, points: 3}": "{id: small_n_answer, points: 4}"}, ["points", "101", "not 100"]),
    ({"{id: small_n_answer, points: 3}": "{id: small_n_answer, points: -3}"}, ["points", "-3", "positive"]),
    ({"{id: warms_up, points: 3, visibility: hidden}": "{id: warms_up, points: 3, visibility: secret}"},
     ["visibility", "'secret'"]),
    ({"{id: warms_up, points: 3, visibility: hidden}": "{id: warms_upp, points: 3, visibility: hidden}"},
     ["warms_upp", "test_warms_upp.py is missing"]),
    ({"      - {id: warms_up, points: 3, visibility: hidden}\n": ""},
     ["warms_up", "test_warms_up.py but is not declared"]),
    ({"    stub: exercises/ex4_oom.py": "    solutoin: solutions/ex4_oom.py\n    stub: exercises/ex4_oom.py"},
     ["exercises[3].solutoin", "unknown key 'solutoin'", "allowed: checks, functions, id, module, solution, stub"]),
])
def test_invalid_course_is_one_clear_error(tmp_path: Path, change: dict[str, str], expected: list[str]) -> None:
    course = course_with(tmp_path, change)
    with pytest.raises(GraderError) as raised:
        load_course(course)
    text = str(raised.value)
    assert str(course) in text
    for part in expected:
        assert part in text, text


def test_invalid_course_through_the_cli(tmp_path: Path) -> None:
    course = course_with(tmp_path, {"default_lang: vi": "default_lang: fr"})
    submission = copy_solutions(tmp_path, "sub", only=("ex1",))
    proc = run_cli("grade", str(submission), "-o", str(tmp_path / "r.yaml"), "--course", str(course))
    assert proc.returncode == 2
    assert "default_lang: 'fr'" in proc.stderr and str(course) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.yaml").exists()
