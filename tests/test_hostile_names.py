"""Any name a file system can hold is a learner (issue 23): very long names, non-UTF-8 bytes,
newlines, escape sequences, formulas, leading dots, the class files' own names, a file and a folder
with the same stem. Each is graded under a safe, unique, stable id, with the original name kept
(escaped) in its report and its gradebook row; none stops or cancels another; a re-run reads back
what the first run wrote and changes nothing.

One class holds every name (tests/hostile_corpus.py) between two ordinary neighbours, graded once
by ``grader batch`` for the module, then again.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from grader.intake.names import class_ids, is_learner_id, learner_id, shown
from tests.conftest import Graded, copy_solutions, run_cli
from tests.hostile_corpus import FOLDERS, NAMES, interpreted, is_safe_id, write_class

SYNTAX_ERROR = "import torch\n\ndef pick_device(:\n    return torch.device('cpu')\n"
NEIGHBOURS = {"aaa_correct": 100.0, "zzz_broken": 0.0}  # an ordinary learner before and after every hostile name


@dataclass(frozen=True)
class ClassRun:
    out: Path
    first: Any  # CompletedProcess
    again: Any
    reports: dict[str, dict[str, Any]]  # original name (escaped) -> report
    files: dict[str, str]  # original name (escaped) -> its report's file name


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> ClassRun:
    root = tmp_path_factory.mktemp("hostile-names")
    cls = root / "class"
    write_class(cls)
    copy_solutions(cls, "aaa_correct")
    (cls / "zzz_broken.py").write_text(SYNTAX_ERROR, encoding="utf-8")
    out = root / "out"
    first = run_cli("batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en")
    again = run_cli("batch", str(cls), "-o", str(out), "--workers", "2", "--lang", "en")
    reports, files = {}, {}
    for path in sorted(out.glob("*.yaml")):
        if path.name != "summary.yaml":
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            reports[data.get("submitted_as", data["learner"])] = data
            files[data.get("submitted_as", data["learner"])] = path.name
    return ClassRun(out, first, again, reports, files)


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as book:
        return list(csv.DictReader(book))


def test_the_class_is_graded_to_the_end_and_nothing_is_a_traceback(graded: ClassRun) -> None:
    for run in (graded.first, graded.again):
        assert run.returncode == 0, run.stderr[-3000:]
        assert "Traceback" not in run.stderr
    total = len(NAMES) + len(FOLDERS) + len(NEIGHBOURS)
    assert f"{total} learners: {total} graded" in graded.first.stdout
    assert f"{total} learners: 0 graded, {total} already up to date" in graded.again.stdout


def test_every_name_is_a_learner_under_a_safe_unique_id(graded: ClassRun) -> None:
    expected = {*NAMES.values(), *FOLDERS.values(), "aaa_correct", "zzz_broken.py"}
    assert set(graded.reports) == expected
    ids = [report["learner"] for report in graded.reports.values()]
    assert all(is_safe_id(learner) for learner in ids), [learner for learner in ids if not is_safe_id(learner)]
    assert len({learner.casefold() for learner in ids}) == len(ids)  # unique, on a case-blind disk too
    for name, report in graded.reports.items():
        assert graded.files[name] == f"{report['learner']}.yaml"
    # An ordinary name keeps the contract's id: the name without its extension.
    assert graded.reports["aaa_correct"]["learner"] == "aaa_correct"
    assert graded.reports["Nguyễn Văn An.py"]["learner"] == "Nguyễn Văn An"


def test_each_hostile_name_is_graded_right_and_its_neighbours_too(graded: ClassRun) -> None:
    for name in (*NAMES.values(), *FOLDERS.values()):
        report = graded.reports[name]
        assert report["grader_error"] is None, (name, report["grader_error"])
        assert report["exercises"]["ex1"]["score"] == 20.0, name
        assert report["score"] == 20.0, name
    assert graded.reports["aaa_correct"]["score"] == 100.0
    assert graded.reports["zzz_broken.py"]["score"] == 0.0


def test_the_original_name_is_kept_escaped_in_the_report_and_the_row(graded: ClassRun) -> None:
    rows = {row["learner"]: row for row in _rows(graded.out)}
    assert len(rows) == len(graded.reports)
    for name, report in graded.reports.items():
        assert report["submitted_as"] == name
        assert not interpreted(report["submitted_as"])
        row = rows[report["learner"]]
        assert row["submitted_as"] in (name, "'" + name)  # a formula-leading one is neutralised
        assert row["score"] == f"{report['score']:g}" and row["status"] == "graded"


def test_nothing_the_class_printed_reaches_the_terminal_as_an_escape(graded: ClassRun) -> None:
    for run in (graded.first, graded.again):
        assert not interpreted(run.stdout)
        # tqdm redraws its bar with a carriage return; nothing else may act on the terminal.
        assert not interpreted(run.stderr, allow_cr=True), run.stderr[-2000:]


def test_a_report_that_cannot_be_written_is_that_learners_error_row(tmp_path: Path) -> None:
    """The output folder refuses one learner's report (a folder sits where it goes): that learner
    is an error row, its neighbours are graded and written, and the batch ends with exit 3."""
    cls = tmp_path / "class"
    copy_solutions(cls, "ann", only=("ex1",))
    copy_solutions(cls, "ben", only=("ex1",))
    out = tmp_path / "out"
    (out / "ann.yaml").mkdir(parents=True)  # where ann's report would go
    proc = run_cli("batch", str(cls), "-o", str(out), "--quiet")
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    rows = {row["learner"]: row for row in _rows(out)}
    assert rows["ben"]["score"] == "20" and rows["ben"]["status"] == "graded"
    assert rows["ann"]["status"] == "grader_error" and rows["ann"]["score"] == ""
    assert "ann" in proc.stderr and "could not be written" in proc.stderr


@pytest.mark.parametrize("name", [b"\x1b]0;pwned\x07title.py", b"caf\xe9.py", b"x" * 242 + b".py"],
                         ids=["escapes", "latin1", "long"])
def test_grader_grade_takes_any_name(name: bytes, tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    folder = tmp_path / "one"
    write_class(folder, {name: NAMES[name]}, {})
    graded = grade_forked(Path(os.fsdecode(os.path.join(os.fsencode(folder), name))))
    assert graded.code == 0, graded.stderr[-3000:]
    report = graded.report
    assert report is not None
    assert is_safe_id(report["learner"])
    assert report["submitted_as"] == NAMES[name]
    assert report["score"] == 20.0
    assert not interpreted(graded.stdout)
    assert not interpreted(graded.stderr)


# -- the ids alone, without grading (grader/intake/names.py) --------------------------------------
def _entries() -> list[tuple[str, bool]]:
    return [(os.fsdecode(n), False) for n in NAMES] + [(os.fsdecode(n), True) for n in FOLDERS]


def test_class_ids_are_safe_unique_and_the_same_whatever_else_the_class_holds() -> None:
    entries = _entries()
    ids = class_ids(entries)
    assert all(is_safe_id(learner) and is_learner_id(learner) for learner in ids.values()), ids
    assert len({learner.casefold() for learner in ids.values()}) == len(entries)
    assert class_ids(list(reversed(entries))) == ids  # not the order the folder lists them in
    for name, is_dir in entries:  # alone in a class, or among the others: the same id, but for a clash
        if name not in ("alice", "alice.py"):
            assert learner_id(name, is_dir=is_dir) == ids[name], name
    assert (ids["alice"], ids["alice.py"]) == ("alice", "alice.py")
    assert learner_id("alice.py", is_dir=False) == "alice"  # the contract: the name without its extension


def test_shown_escapes_what_a_screen_would_act_on_and_nothing_else() -> None:
    for raw, expected in NAMES.items():
        assert shown(os.fsdecode(raw)) == expected
    assert shown("Nguyễn Văn An\n", keep="\n") == "Nguyễn Văn An\n"
    assert shown("a\\b C:\\Users") == "a\\b C:\\Users"  # printable: unchanged
    assert not interpreted(shown("".join(map(chr, range(0x110000)))))
