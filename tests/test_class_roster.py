"""``grader batch --roster`` on a class as Canvas hands it over (tests/roster_class.py), graded for
real once (the ``roster_class`` fixture): every learner of the roster in the gradebook and the
summary, those who submitted nothing too, the submission that matched nobody listed apart, names
kept exactly, and the grades exported to Canvas as its importer reads them."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import yaml

from grader.score import texts
from tests.conftest import run_cli
from tests.lms_importers import canvas_import
from tests.roster_class import RosterClass


def rows_of(out: Path) -> dict[str, dict[str, str]]:
    text = (out / "gradebook.csv").read_text(encoding="utf-8")
    return {row["learner"]: row for row in csv.DictReader(io.StringIO(text))}


def test_every_learner_of_the_roster_has_a_row(roster_class: RosterClass) -> None:
    rows = rows_of(roster_class.out)
    assert list(rows) == ["20201234", "20201235", "20201236", "20201237", "ghost_99999_800007_ex1_device"]
    an, binh, cong, eve, ghost = rows.values()
    # Five Canvas entries, ex2 re-uploaded as ex2_timing-1.py: one learner, graded from one folder.
    assert (an["status"], an["score"], an["name"], an["section"]) == ("graded", "100", "Nguyễn, Văn An", "L01")
    assert an["submission"].count("nguyễnvănan_12345_") == 5
    assert sorted(p.name for p in (roster_class.out / ".staged" / "20201234").iterdir()) == [
        "ex1_device.py", "ex2_timing.py", "ex3_roundtrip.py", "ex4_oom.py", "ex5_amp.py"]
    # A late single file: only ex3 attempted, and its mistake costs points.
    assert binh["status"] == "graded" and binh["name"] == "Trần, Thị Bình"
    assert 0 < float(binh["ex3"]) < 20 and binh["ex1"] == "0"
    # Did not submit: listed, empty cells (the default), the roster's name exactly; a formula as text.
    assert (cong["status"], cong["score"], cong["ex1"], cong["max_score"]) == ("missing", "", "", "100")
    assert eve["status"] == "missing" and eve["name"] == "'=HYPERLINK(\"http://evil.example\"), Eve"
    # Matched nobody: graded under its own name, listed apart.
    assert (ghost["status"], ghost["name"], ghost["submission"]) == (
        "unmatched", "", "ghost_99999_800007_ex1_device.py")
    report = yaml.safe_load((roster_class.out / "20201234.yaml").read_text(encoding="utf-8"))
    assert report["learner"] == "20201234" and report["score"] == 100.0


def test_the_summary_speaks_the_batch_language_and_lists_the_roster(roster_class: RosterClass) -> None:
    html = (roster_class.out / "summary.html").read_text(encoding="utf-8")
    assert '<html lang="vi">' in html
    for key, count in (("missing.heading", 2), ("unmatched.heading", 1)):
        assert texts.ui("vi", f"summary.{key}").format(count=count) in html
    for key in ("distribution", "exercises", "checks", "pass_rate_note"):
        assert texts.ui("vi", f"summary.{key}") in html
        assert texts.ui("en", f"summary.{key}") not in html
    assert "Lê, Công" in html and "ghost_99999_800007_ex1_device.py" in html
    assert "=HYPERLINK(&quot;http://evil.example&quot;)" in html  # escaped, shown as text
    summary = yaml.safe_load((roster_class.out / "summary.yaml").read_text(encoding="utf-8"))
    assert summary["lang"] == "vi" and summary["learners"] == 3  # the figures count what was graded


def test_zero_for_the_missing_regrades_nobody(roster_class: RosterClass, tmp_path: Path) -> None:
    """The instructor's other choice, on the same output folder: every report is up to date."""
    out = tmp_path / "grades"
    shutil.copytree(roster_class.out, out)
    proc = run_cli("batch", str(roster_class.submissions), "-o", str(out), "--roster", str(roster_class.roster),
                   "--missing", "zero")
    assert proc.returncode == 0, proc.stderr
    assert "0 graded, 3 already up to date" in proc.stdout
    assert "roster: 4 learners, 2 submitted, 2 did not (gradebook status missing), 1 submissions matched nobody" in (
        proc.stdout)
    rows = rows_of(out)
    assert [rows["20201236"][c] for c in ("ex1", "ex5", "score", "status")] == ["0", "0", "0", "missing"]
    assert rows["20201234"]["score"] == "100"


def test_the_grades_go_to_canvas(roster_class: RosterClass, tmp_path: Path) -> None:
    target = tmp_path / "canvas.csv"
    proc = run_cli("export", "canvas", str(roster_class.out), "-o", str(target), "--assignment", "Bài 14 (5566)")
    assert proc.returncode == 0, proc.stderr
    assert "ghost_99999_800007_ex1_device" in proc.stderr  # left out, and the instructor is told
    imported = canvas_import(target.read_text(encoding="utf-8"))
    assert [(a.title, a.id, a.points_possible) for a in imported.assignments] == [("Bài 14", "5566", "100")]
    rows = rows_of(roster_class.out)
    grades = {student.sis_user_id: student.grades[0] for student in imported.students}
    assert grades == {"20201234": "100", "20201235": rows["20201235"]["score"], "20201236": "", "20201237": ""}


def test_a_roster_option_needs_a_roster(roster_class: RosterClass, tmp_path: Path) -> None:
    proc = run_cli("batch", str(roster_class.submissions), "-o", str(tmp_path / "x"), "--missing", "zero")
    assert proc.returncode == 2 and "--missing goes with --roster" in proc.stderr
    proc = run_cli("batch", str(roster_class.submissions), "-o", str(tmp_path / "x"), "--roster",
                   str(tmp_path / "nope.csv"))
    assert proc.returncode == 2 and "cannot read" in proc.stderr
