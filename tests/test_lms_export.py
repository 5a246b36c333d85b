"""``grader export canvas|moodle``: files each platform's own importer takes as its documentation
and source say (tests/lms_importers.py ports the importers: Canvas's gradebook_importer.rb, Moodle's
grade/import/csv/classes/load_data.php).

The batch output is written here as a batch writes it — the class list of a roster and a sealed
report per learner (tests/test_summary.py's reports) — so no grading is needed; the whole chain,
grading included, runs in tests/test_class_roster.py.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml

from grader.course import load_course
from grader.intake.discover import discover
from grader.intake.downloads import claim
from grader.intake.roster import assign, match, read_roster
from grader.outputs.classlist import MissingPolicy, record_of, write_record
from tests.conftest import run_cli
from tests.lms_importers import ImportRefused, canvas_import, moodle_import
from tests.test_summary import learner_report, write_as_a_batch_would

# Canvas's own gradebook export (app/models/gradebook_exporter.rb): what an instructor downloads, with
# a custom column "Email" (custom columns come right after Section).
ROSTER = (
    '"Student","ID","SIS User ID","SIS Login ID","Section","Email","Old quiz (111)"\n'
    '"    Points Possible","","","","","","10.00"\n'
    '"Nguyễn, Văn An","12345","20201234","an.nguyen","L01","an@uni.edu.vn","9"\n'
    '"Trần, Thị Bình","12346","20201235","binh.tran","L01","binh@uni.edu.vn","8"\n'
    '"Lê, Công","12347","20201236","cong.le","L02","cong@uni.edu.vn",""\n'
    '"=HYPERLINK(""http://evil.example""), Eve","12348","20201237","eve","L02","eve@uni.edu.vn",""\n'
    '"Points Possible, Mallory","12349","20201238","mallory","L02","mallory@uni.edu.vn",""\n'
    '"Phạm, Dũng","12350","20201239","dung.pham","L02","dung@uni.edu.vn",""\n'
)
# Canvas's "Download Submissions" names (app/models/content_zipper.rb).
ENTRIES = {
    "nguyễnvănan_12345_700001_bai14.ipynb": "20201234",
    "trầnthịbình_late_12346_700002_bai14.py": "20201235",
    "pointspossiblemallory_12349_700003_bai14.py": "20201238",
    "phạmdũng_12350_700004_bai14.py": "20201239",  # graded, but the grader failed
    "ghost_99999_700005_bai14.py": None,  # nobody on the roster
}
SCORES = {"20201234": 0, "20201235": 1, "20201238": 5}  # learner_report's index: 100, 92, 72 points


def batch_output(root: Path, missing: MissingPolicy) -> Path:
    """A batch output folder of this class, as ``grader batch --roster`` leaves it."""
    submissions, out = root / "submissions", root / f"out-{missing}"
    submissions.mkdir(exist_ok=True)
    for name in ENTRIES:
        (submissions / name).write_text("", encoding="utf-8")
    (root / "roster.csv").write_text(ROSTER, encoding="utf-8")
    roster = read_roster(root / "roster.csv")
    claims = [claim(path, {}) for path in sorted(submissions.iterdir())]
    found = match(roster, claims)
    planned = assign(found, claims, out / ".staged", discover(submissions))
    out.mkdir()
    write_record(record_of(roster, found, missing, planned.unmatched_ids), out)
    for learner in planned.learners:
        report = learner_report(learner.id, SCORES.get(learner.id, 3))
        if learner.id == "20201239":
            report["grader_error"] = "ModuleNotFoundError: No module named 'numpy'"
        write_as_a_batch_would(out, report)
    return out


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lms")
    return {policy: batch_output(root, policy) for policy in ("empty", "zero")}


def exported(out: Path, platform: str, *extra: str) -> tuple[str, str]:
    target = out.parent / f"{out.name}-{platform}-{len(extra)}.csv"
    proc = run_cli("export", platform, str(out), "-o", str(target), *extra)
    assert proc.returncode == 0, proc.stderr
    identified = {"canvas": "ID 6/6, SIS User ID 6/6, SIS Login ID 6/6", "moodle": "ID number 6/6, Email address 6/6"}
    assert f"learners identified by: {identified[platform]}" in proc.stdout
    raw = target.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf")  # UTF-8 without a BOM: what both importers read by default
    return raw.decode("utf-8"), proc.stderr


def test_canvas_takes_the_file_as_its_importer_reads_it(outputs: dict[str, Path]) -> None:
    text, stderr = exported(outputs["empty"], "canvas")
    imported = canvas_import(text)
    [assignment] = imported.assignments
    assert (assignment.title, assignment.id, assignment.points_possible) == (
        load_course().title["en"], None, "100")  # a new assignment of 100 points, titled in the reports' language
    rows = {student.id: student for student in imported.students}
    # Every learner of the roster, known by Canvas's own ids; never the submission that matched nobody.
    assert sorted(rows) == ["12345", "12346", "12347", "12348", "12349", "12350"]
    assert [(rows[i].sis_user_id, rows[i].sis_login_id) for i in ("12345", "12346")] == [
        ("20201234", "an.nguyen"), ("20201235", "binh.tran")]
    grades = {i: rows[i].grades[0] for i in rows}
    assert grades == {"12345": "100", "12346": "92", "12349": "72",
                      "12347": "", "12348": "",  # did not submit: empty, Canvas changes nothing
                      "12350": ""}  # the grader failed: no grade, never a 0
    assert rows["12345"].name == "Nguyễn, Văn An"  # accents kept exactly
    assert rows["12348"].name.startswith("'=")  # a formula is shown as text
    assert "ghost" in stderr and "20201239" in stderr  # left out, and not graded: both said


def test_canvas_grades_an_existing_assignment_by_its_id(outputs: dict[str, Path]) -> None:
    text, _ = exported(outputs["zero"], "canvas", "--assignment", "Bài 14: GPU và CUDA (5566)")
    imported = canvas_import(text)
    assert [(a.title, a.id) for a in imported.assignments] == [("Bài 14: GPU và CUDA", "5566")]
    grades = {student.id: student.grades[0] for student in imported.students}
    assert (grades["12347"], grades["12350"]) == ("0", "")  # --missing zero: a 0; a grader failure: still none


def test_a_learner_named_points_possible_cannot_set_the_points(outputs: dict[str, Path]) -> None:
    """Canvas reads any row whose first cell holds "Points Possible" as the assignment's points
    (check_for_non_student_row): that learner's row must not say it; Canvas finds them by id."""
    text, _ = exported(outputs["empty"], "canvas")
    imported = canvas_import(text)
    assert imported.assignments[0].points_possible == "100"
    assert {student.id: student.grades[0] for student in imported.students}["12349"] == "72"


@pytest.mark.parametrize(("map_from", "key"), [("Email address", "email"), ("ID number", "sis")])
def test_moodle_takes_the_file_with_either_identifier(outputs: dict[str, Path], map_from: str, key: str) -> None:
    text, _ = exported(outputs["empty"], "moodle")
    title = load_course().title["en"]
    grades = {g.user_value: g.grade for g in moodle_import(text, map_from, title)}
    an, cong = ("an@uni.edu.vn", "cong@uni.edu.vn") if key == "email" else ("20201234", "20201236")
    assert grades[an] == 100.0 and grades[cong] is None  # "-": no grade
    assert len(grades) == 6 and None in grades.values()


def test_moodle_zero_for_the_missing_when_the_instructor_chose_it(outputs: dict[str, Path]) -> None:
    text, _ = exported(outputs["zero"], "moodle")
    grades = {g.user_value: g.grade for g in moodle_import(text, "ID number", load_course().title["en"])}
    assert grades["20201236"] == 0.0 and grades["20201237"] == 0.0
    assert grades["20201239"] is None  # the grader failed: no grade, even with --missing zero


def test_the_importer_ports_refuse_what_the_platforms_refuse() -> None:
    """The ports are strict where the importers are: a file our export must never write fails them."""
    with pytest.raises(ImportRefused):
        canvas_import("Name,ID,Section,Quiz\nAn,1,L01,3\n")  # no "Student" first
    with pytest.raises(ImportRefused):
        canvas_import("Student,ID,SIS User ID,SIS Login ID,Group,Quiz\nAn,1,,,L01,3\n")  # not ending in Section
    with pytest.raises(ImportRefused, match="gradevaluetoobig"):
        moodle_import("ID number,Grade\n1,101\n", "ID number", "Grade")
    with pytest.raises(ImportRefused, match="badgrade"):
        moodle_import("ID number,Grade\n1,\n", "ID number", "Grade")


def test_export_needs_a_roster_and_intact_reports(outputs: dict[str, Path], tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    write_as_a_batch_would(bare, learner_report("an", 0))
    proc = run_cli("export", "canvas", str(bare), "-o", str(tmp_path / "x.csv"))
    assert proc.returncode == 2 and "without a roster" in proc.stderr
    forged = tmp_path / "forged"
    forged.mkdir()
    for file in outputs["empty"].iterdir():
        if file.is_file():
            (forged / file.name).write_bytes(file.read_bytes())
    report = yaml.safe_load((forged / "20201235.yaml").read_text(encoding="utf-8"))
    report["score"] = 100.0
    (forged / "20201235.yaml").write_text(yaml.safe_dump(report, allow_unicode=True), encoding="utf-8")
    proc = run_cli("export", "moodle", str(forged), "-o", str(tmp_path / "y.csv"))
    assert proc.returncode == 2 and "seal does not match" in proc.stderr
    assert not (tmp_path / "y.csv").exists()


def test_the_gradebook_lists_the_roster(outputs: dict[str, Path], tmp_path: Path) -> None:
    """The gradebook a merge writes from this folder: every learner of the roster in its order, the
    missing with the chosen cells, then what matched nobody."""
    for policy, cell in (("empty", ""), ("zero", "0")):
        merged = tmp_path / f"merged-{policy}"
        proc = run_cli("merge", str(outputs[policy]), "-o", str(merged))
        assert proc.returncode == 0, proc.stderr
        rows = list(csv.DictReader(io.StringIO((merged / "gradebook.csv").read_text(encoding="utf-8"))))
        assert [(r["learner"], r["status"]) for r in rows] == [
            ("20201234", "graded"), ("20201235", "graded"), ("20201236", "missing"), ("20201237", "missing"),
            ("20201238", "graded"), ("20201239", "grader_error"), ("ghost_99999_700005_bai14", "unmatched")]
        missing = rows[2]
        assert [missing[c] for c in ("ex1", "ex5", "score")] == [cell] * 3 and missing["max_score"] == "100"
        assert rows[0]["name"] == "Nguyễn, Văn An" and rows[0]["section"] == "L01"
        assert rows[0]["submission"] == "nguyễnvănan_12345_700001_bai14.ipynb"
        assert rows[3]["name"].startswith("'=HYPERLINK")
        assert (merged / "roster.yaml").read_text(encoding="utf-8") == (
            outputs[policy] / "roster.yaml").read_text(encoding="utf-8")


def test_merge_refuses_shards_of_different_rosters(outputs: dict[str, Path], tmp_path: Path) -> None:
    proc = run_cli("merge", str(outputs["empty"]), str(outputs["zero"]), "-o", str(tmp_path / "m"))
    assert proc.returncode == 2 and "different rosters" in proc.stderr


def test_the_summary_lists_who_did_not_submit_in_the_batch_language(outputs: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    out = outputs["empty"]
    vi = tmp_path / "vi"
    vi.mkdir()
    for file in out.iterdir():
        if file.is_file() and file.suffix == ".yaml" and file.stem not in ("roster", "summary"):
            report = yaml.safe_load(file.read_text(encoding="utf-8"))
            write_as_a_batch_would(vi, {**report, "lang": "vi"})
    (vi / "roster.yaml").write_bytes((out / "roster.yaml").read_bytes())
    proc = run_cli("merge", str(vi), "-o", str(tmp_path / "merged"))
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "merged" / "summary.html").read_text(encoding="utf-8")
    assert '<html lang="vi">' in html
    assert "Không nộp bài (2)" in html and "Bài nộp không khớp với ai trong danh sách lớp (1)" in html
    assert "ghost_99999_700005_bai14.py" in html and "Lê, Công" in html
    summary = yaml.safe_load((tmp_path / "merged" / "summary.yaml").read_text(encoding="utf-8"))
    assert summary["lang"] == "vi" and summary["missing_scores"] == "empty"
    assert [m["learner"] for m in summary["missing"]] == ["20201236", "20201237"]
    assert summary["unmatched"][0]["reason"] == "không khớp với ai trong danh sách lớp"
