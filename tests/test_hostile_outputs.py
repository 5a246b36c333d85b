"""Every place a learner's text or name reaches a person or a program is safe (issue 23): the
terminal summary and the progress bar (control characters shown, never interpreted; no line of
learner text looks like the grader's own), gradebook.csv (formula-leading cells neutralised as
OWASP advises, every cell quoted), the HTML and YAML class summary, Gradescope's results.json and
the YAML reports.

The attacker (tests/hostile_corpus.py TEXTS) raises, prints and answers with every hostile text, in
a file whose name is an escape sequence; it is graded by ``grader grade`` (with results.json) and
by ``grader batch`` among neighbours whose names are formulas.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader import yamltext
from grader.intake.names import shown
from grader.outputs.gradebook import csv_text
from grader.outputs.terminal import summary
from grader.score.results import CheckResult, DeviceInfo, ExerciseResult, Report, TopLevelStop
from tests.conftest import copy_solutions, run_cli, solution_text
from tests.hostile_corpus import ALL_TEXT, FORMULA_STARTS, TEXTS, interpreted

ATTACKER = "\x1b]0;pwned\x07\x1b[2Jmessages.py"
ATTACK = f'''
ANSWER = {ALL_TEXT!r}
print(ANSWER)
raise ValueError(ANSWER)
''' + solution_text("ex1") + f'''
SMALL_N_ANSWER = {TEXTS["formula"]!r}

def roundtrip(x, device):
    raise RuntimeError(ANSWER)

def to_numpy(t):
    print(ANSWER)
    return ANSWER
'''
NEIGHBOURS = {'=HYPERLINK("evil","x").py': 20.0, "+1.py": 20.0, "@A1.py": 20.0, "-1.py": 20.0, "plain": 100.0}
# The grader's own lines in an English terminal summary: only these may start at column 0.
GRADER_LINES = ("Grading report", "Device:", "Not graded", "Top level:", "Score:")
COLUMNS = 80


@dataclass(frozen=True)
class Outputs:
    grade: Any  # CompletedProcess of grader grade
    report_text: str
    report: dict[str, Any]
    results: dict[str, Any]
    results_bytes: bytes
    batch: Any  # CompletedProcess of grader batch
    out: Path


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    root = tmp_path_factory.mktemp("hostile-outputs")
    cls = root / "class"
    cls.mkdir()
    (cls / ATTACKER).write_text(ATTACK, encoding="utf-8")
    for name, score in NEIGHBOURS.items():
        if score == 100.0:
            copy_solutions(cls, name)
        else:
            (cls / name).write_text(solution_text("ex1"), encoding="utf-8")
    report_path, results_path = root / "report.yaml", root / "results.json"
    grade = run_cli("grade", str(cls / ATTACKER), "-o", str(report_path), "--lang", "en",
                    "--gradescope", str(results_path), env={"COLUMNS": str(COLUMNS)})
    out = root / "out"
    batch = run_cli("batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en",
                    env={"COLUMNS": str(COLUMNS)})
    report_text = report_path.read_text(encoding="utf-8") if report_path.exists() else ""
    results_bytes = results_path.read_bytes() if results_path.exists() else b""
    return Outputs(grade, report_text, yaml.safe_load(report_text) if report_text else {},
                   json.loads(results_bytes) if results_bytes else {}, results_bytes, batch, out)


def _width(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def test_grading_the_attacker_works_and_keeps_its_text(outputs: Outputs) -> None:
    assert outputs.grade.returncode == 0, outputs.grade.stderr[-3000:]
    assert outputs.batch.returncode == 0, outputs.batch.stderr[-3000:]
    assert outputs.report["exercises"]["ex1"]["score"] == 20.0  # the neighbour exercise
    roundtrip = next(c for c in outputs.report["exercises"]["ex3"]["checks"] if c["id"] == "ex3.roundtrip_values")
    assert roundtrip["status"] == "error"
    assert "pwned by a learner" in roundtrip["message"]  # what the learner wrote is kept, made harmless


def test_the_terminal_shows_control_characters_and_one_score_line(outputs: Outputs) -> None:
    text = outputs.grade.stdout
    assert not interpreted(text), interpreted(text)[:10]
    assert not interpreted(outputs.grade.stderr)
    lines = text.split("\n")
    scores = [line for line in lines if line.startswith("Score:")]
    assert len(scores) == 1, scores
    assert scores[0].startswith(f"Score: {outputs.report['score']:.1f} / 100.0")
    for line in lines:  # learner text only ever continues an indented line of the grader's
        assert not line or line.startswith((" ", *GRADER_LINES)), line
        assert _width(line) <= COLUMNS, line
    assert "\\x1b]0;pwned by a learner\\x07" in text  # shown, escaped


def test_the_progress_bar_and_the_closing_lines_show_names_escaped(outputs: Outputs) -> None:
    assert not interpreted(outputs.batch.stdout)
    assert not interpreted(outputs.batch.stderr, allow_cr=True), outputs.batch.stderr[-2000:]


def test_gradebook_cells_are_quoted_and_never_formulas(outputs: Outputs) -> None:
    raw = (outputs.out / "gradebook.csv").read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(raw)))
    assert len(rows) == 1 + len(NEIGHBOURS) + 1
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS), row
    for line in raw.splitlines():  # every cell quoted (OWASP): a separator inside stays inside
        assert re.fullmatch(r'"(?:[^"]|"")*"(?:,"(?:[^"]|"")*")*', line), line
    names = {row[-1] for row in rows[1:]}
    assert "'=HYPERLINK(\"evil\",\"x\").py" in names and "'+1.py" in names and "'-1.py" in names
    assert "'@A1.py" in names


def test_the_class_summary_shows_names_and_text_escaped(outputs: Outputs) -> None:
    html = (outputs.out / "summary.html").read_text(encoding="utf-8")
    assert not interpreted(html)
    assert "<script" not in html.lower()
    summary = (outputs.out / "summary.yaml").read_bytes().decode("utf-8")
    assert not interpreted(summary)
    slowest = yaml.safe_load(summary)["slowest"]
    assert {entry["learner"] for entry in slowest} <= {p.stem for p in outputs.out.glob("*.yaml")}


def test_yaml_reports_hold_no_raw_control_characters(outputs: Outputs) -> None:
    texts = [outputs.report_text] + [p.read_bytes().decode("utf-8") for p in outputs.out.glob("*.yaml")]
    for text in texts:
        assert not interpreted(text), interpreted(text)[:10]
        strings = list(_strings(yaml.safe_load(text)))  # none holds what UTF-8 cannot, even escaped by YAML
        assert not [t for t in strings if re.search("[\ud800-\udfff]", t)]


def test_yaml_written_and_read_with_libyaml_is_what_pyyamls_own_code_makes_of_it() -> None:
    """The grader writes and reads YAML with libyaml's C emitter and parser where PyYAML has them
    (grader/yamltext.py): every hostile text, short and wrapped over long lines, reads back as it
    was, whichever of the two wrote it and whichever reads it — a lone surrogate too, which libyaml
    alone would neither write nor read (a report the grader could not write would cost that learner
    a grade, or a class its gradebook)."""
    if yaml.__with_libyaml__:
        assert "CSafe" in yamltext._LOADER.__name__ and "CSafe" in yamltext._DUMPER.__name__  # noqa: SLF001
    for name, text in TEXTS.items():
        data = {name: text, "checks": [{"id": "ex1.a", "message": text * 40, "seconds": 0.25}], "names": [text]}
        ours, theirs = yamltext.dump(data), yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)
        for written in (ours, theirs):
            assert yamltext.load(written) == yaml.safe_load(written) == data, name


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(data, list):
        for value in data:
            yield from _strings(value)


def test_results_json_is_valid_utf8_and_shows_control_characters(outputs: Outputs) -> None:
    outputs.results_bytes.decode("utf-8")  # strict: a lone surrogate would not encode
    assert outputs.results["tests"]
    for test in outputs.results["tests"]:
        assert not interpreted(test["output"]), (test["name"], interpreted(test["output"])[:5])
    assert not interpreted(outputs.results["output"])


# -- each output's one function, on made-up reports (no grading) ----------------------------------
def _report(text: str) -> Report:
    check = CheckResult("ex3.roundtrip_values", "error", 0.0, 4.0, f"Your code raised RuntimeError: {text}",
                        hint="Reread the lesson.")
    exercise = ExerciseResult("ex3", "CPU → device → CPU", "error", 0.0, 20.0, (check,))
    return Report(learner=text, submission=text, score=15.0, max_score=100.0,
                  device=DeviceInfo("cpu", text, "2.13"), exercises=(exercise,), lang="en", grading_seconds=1.0,
                  grader_version="test", grader_error="", submitted_as=text,
                  top_level=(TopLevelStop("bai.py, line 3", "error", text, f"bai.py, line 3 raised {text}"),))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_cell_is_quoted_and_none_is_a_formula(name: str) -> None:
    text = TEXTS[name]
    rows = list(csv.reader(io.StringIO(csv_text([["learner", text], [text, "20"]]))))
    assert all(not cell.startswith(FORMULA_STARTS) and not interpreted(cell) for row in rows for cell in row), rows
    assert rows[1][0] in (shown(text), "'" + shown(text))
    assert csv_text([[text]]).startswith('"')


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_the_terminal_never_lets_learner_text_start_a_line(name: str) -> None:
    text = summary(_report(TEXTS[name] * 5), width=COLUMNS)
    assert not interpreted(text)
    lines = text.split("\n")
    assert [line for line in lines if line.startswith("Score:")] == ["Score: 15.0 / 100.0   (Graded in 1.0 s)"]
    for line in lines:
        assert not line or line.startswith((" ", *GRADER_LINES)), line
        assert _width(line) <= COLUMNS, line
