"""The roster as each learning platform exports it, and the file names of each one's "download all
submissions" (docs/instructors.md, "Grading a class from its roster", cites where each shape is
written). Pure helpers, tested alone; tests/test_class_roster.py runs ``grader batch --roster``."""

from __future__ import annotations

import codecs
import unicodedata
from pathlib import Path

import pytest

from grader.errors import GraderError
from grader.intake import discover
from grader.intake.discover import stage
from grader.intake.downloads import GRADESCOPE_METADATA, claim, gradescope_metadata
from grader.intake.roster import MAX_BYTES, ClassList, Roster, assign, match, read_roster
from tests.conftest import windows_1258

# Canvas's gradebook export, as app/models/gradebook_exporter.rb writes it: the "Points Possible"
# row, sortable names, the Integration ID-less SIS columns.
CANVAS = (
    '"Student","ID","SIS User ID","SIS Login ID","Section","Bài 14: GPU và CUDA (5566)","Current Score"\n'
    '"    Points Possible","","","","","100.00","(read only)"\n'
    '"Nguyễn, Văn An","12345","20201234","an.nguyen","L01","",""\n'
    '"Trần, Thị Bình","12346","20201235","binh.tran","L01","",""\n'
    '"Lê, Công","12347","20201236","cong.le","L02","",""\n'
)
# Moodle's "Plain text file" grade export (grade/export/txt): its own headers.
MOODLE = (
    "First name,Last name,ID number,Institution,Department,Email address,Bài 14 (Real)\n"
    "Văn An,Nguyễn,20201234,UET,,an@uni.edu.vn,-\n"
    "Thị Bình,Trần,20201235,UET,,binh@uni.edu.vn,-\n"
)
# Moodle's grading worksheet: the same participant numbers as its download's file names.
MOODLE_WORKSHEET = (
    "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed\n"
    "Participant 481516,Nguyễn Văn An,an@uni.edu.vn,Submitted for grading,,100.00,Yes\n"
    "Participant 481517,Trần Thị Bình,binh@uni.edu.vn,No submission,,100.00,Yes\n"
)
GRADESCOPE = (
    "First Name,Last Name,SID,Email,Role,Sections\n"
    "Văn An,Nguyễn,20201234,an@uni.edu.vn,Student,L01\n"
    "Grace,Hopper,,grace@uni.edu.vn,Instructor,\n"
    "Thị Bình,Trần,20201235,binh@uni.edu.vn,Student,L01\n"
)
PLAIN_VI = ("MSSV;Họ và tên;Email;Lớp\n20201234;Nguyễn Văn An;an@uni.edu.vn;L01\n"
            "20201235;Trần Thị Bình;binh@uni.edu.vn;L02\n")


def roster_of(tmp_path: Path, text: str | bytes, name: str = "roster.csv", encoding: str | None = None) -> Roster:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return read_roster(path, encoding)


def matched(tmp_path: Path, roster: Roster, names: list[str], *, folders: tuple[str, ...] = (),
            metadata: str | None = None) -> ClassList:
    folder = tmp_path / "submissions"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("def pick_device(): ...\n", encoding="utf-8")
    for name in folders:
        (folder / name).mkdir()
        (folder / name / "bai14.ipynb").write_text("{}", encoding="utf-8")
    if metadata is not None:
        (folder / GRADESCOPE_METADATA).write_text(metadata, encoding="utf-8")
    meta = gradescope_metadata(folder)
    return match(roster, [claim(p, meta) for p in sorted(folder.iterdir()) if p.name != GRADESCOPE_METADATA])


def keys(found: ClassList) -> dict[str, list[str]]:
    return {m.member.key: sorted(p.name for p in m.paths) for m in found.matched}


# --- reading each platform's export ---------------------------------------------------------

def test_canvas_export_as_it_comes(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, CANVAS)
    assert [m.key for m in roster.members] == ["20201234", "20201235", "20201236"]  # Points Possible skipped
    an = roster.members[0]
    assert (an.name, an.canvas_id, an.student_id, an.login, an.section) == (
        "Nguyễn, Văn An", "12345", "20201234", "an.nguyen", "L01")


def test_moodle_export_and_worksheet(tmp_path: Path) -> None:
    export = roster_of(tmp_path, MOODLE)
    assert [(m.key, m.name, m.email) for m in export.members] == [
        ("20201234", "Văn An Nguyễn", "an@uni.edu.vn"), ("20201235", "Thị Bình Trần", "binh@uni.edu.vn")]
    sheet = roster_of(tmp_path, MOODLE_WORKSHEET, "worksheet.csv")
    assert [(m.key, m.participant, m.name) for m in sheet.members] == [
        ("an@uni.edu.vn", "481516", "Nguyễn Văn An"), ("binh@uni.edu.vn", "481517", "Trần Thị Bình")]


def test_gradescope_roster_keeps_only_students(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, GRADESCOPE)
    assert [m.key for m in roster.members] == ["20201234", "20201235"]
    assert roster.members[0].section == "L01"


def test_vietnamese_headers_and_semicolons(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, PLAIN_VI)
    assert [(m.key, m.name, m.section) for m in roster.members] == [
        ("20201234", "Nguyễn Văn An", "L01"), ("20201235", "Trần Thị Bình", "L02")]


@pytest.mark.parametrize("encoded", [
    codecs.BOM_UTF8 + PLAIN_VI.encode("utf-8"),
    PLAIN_VI.encode("utf-16"),  # with its BOM, as Excel's "Unicode text" writes it
    ("sep=;\n" + PLAIN_VI).encode("utf-8"),
    PLAIN_VI.replace("\n", "\r\n").encode("utf-8"),
], ids=["utf8-bom", "utf16", "excel-sep-line", "crlf"])
def test_encodings_keep_every_accent(tmp_path: Path, encoded: bytes) -> None:
    roster = roster_of(tmp_path, encoded)
    assert [m.name for m in roster.members] == ["Nguyễn Văn An", "Trần Thị Bình"]


def test_names_are_kept_exactly(tmp_path: Path) -> None:
    decomposed = unicodedata.normalize("NFD", "Nguyễn  Văn An")  # two spaces, NFD: as typed, kept
    roster = roster_of(tmp_path, f"id,name\n1,{decomposed}\n")
    assert roster.members[0].name == decomposed


def test_a_code_page_is_named_never_guessed(tmp_path: Path) -> None:
    raw = windows_1258(PLAIN_VI)
    with pytest.raises(GraderError, match=r"not UTF-8 .*--roster-encoding"):
        roster_of(tmp_path, raw)
    names = [m.name for m in roster_of(tmp_path, raw, encoding="cp1258").members]
    assert [unicodedata.normalize("NFC", name) for name in names] == ["Nguyễn Văn An", "Trần Thị Bình"]


@pytest.mark.parametrize(("text", "message"), [
    ("name,section\nAn,L01\n", "no column identifies a learner"),
    ("id,name\n1,An\n1,Bình\n", "lines 2 and 3 are the same learner"),
    ("id,name\n,An\n", "line 2: this learner has no id"),
    ("id,name\n", "lists no learner"),
    ("", "is empty"),
    ("id,name\n1,An\x00\n", "NUL bytes"),
    ("id,name\n1," + "A" * 2000 + "\n", "longer than 1000 characters"),
])
def test_bad_rosters_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(GraderError, match=message):
        roster_of(tmp_path, text)


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "roster.csv"
    with open(path, "wb") as handle:
        handle.write(b"id,name\n")
        handle.truncate(MAX_BYTES + 10)
    with pytest.raises(GraderError, match="larger than"):
        read_roster(path)


def test_hostile_ids_become_safe_keys(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, 'id,name\n"../../etc/passwd",Mallory\n"=HYPERLINK(""x"")",Eve\n')
    for member in roster.members:
        assert "/" not in member.key and not member.key.startswith((".", "=")), member.key
    assert roster.members[0].student_id == "../../etc/passwd"  # the id itself is kept, as written


# --- matching each platform's download -------------------------------------------------------

def test_canvas_download_names(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, CANVAS)
    found = matched(tmp_path, roster, [
        "nguyenvanan_12345_6789012_bai14.ipynb",
        "trầnthịbình_late_12346_6789013_ex1_device.py",  # late, two files: one learner
        "trầnthịbình_late_12346_6789014_ex2_timing.py",
        "lecong_LATE_12347_6789015_bai14.py",  # older exports kept LATE upper-case
    ])
    assert keys(found) == {
        "20201234": ["nguyenvanan_12345_6789012_bai14.ipynb"],
        "20201235": ["trầnthịbình_late_12346_6789013_ex1_device.py", "trầnthịbình_late_12346_6789014_ex2_timing.py"],
        "20201236": ["lecong_LATE_12347_6789015_bai14.py"],
    }
    assert {m.member.key: set(m.rules) for m in found.matched}["20201234"] == {"canvas_id"}
    assert not found.unmatched and not found.missing


def test_canvas_names_match_a_roster_without_canvas_ids(tmp_path: Path) -> None:
    """A roster from the university (no Canvas user id): the compacted name in the file name."""
    roster = roster_of(tmp_path, PLAIN_VI.replace(";", ","))
    found = matched(tmp_path, roster, ["nguyenvanan_99_1_bai14.ipynb", "trầnthịbình_98_2_bai14.ipynb"])
    # "Nguyễn Văn An" has no ễ/ă-less spelling on the roster: the download's ASCII name is nobody's.
    assert keys(found) == {"20201235": ["trầnthịbình_98_2_bai14.ipynb"]}
    assert [u.path.name for u in found.unmatched] == ["nguyenvanan_99_1_bai14.ipynb"]


def test_mac_unzipped_names_match(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, CANVAS)
    nfd = unicodedata.normalize("NFD", "trầnthịbình_12346_6789013_bai14.py")
    assert keys(matched(tmp_path, roster, [nfd])) == {"20201235": [nfd]}


def test_moodle_download_names(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, MOODLE)
    found = matched(tmp_path, roster, ["Văn An Nguyễn_481516_assignsubmission_file_bai14.ipynb"],
                    folders=("Thị Bình Trần_481517_assignsubmission_file_",))
    assert keys(found) == {"20201234": ["Văn An Nguyễn_481516_assignsubmission_file_bai14.ipynb"],
                           "20201235": ["Thị Bình Trần_481517_assignsubmission_file_"]}


def test_moodle_participant_numbers_match_the_worksheet(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, MOODLE_WORKSHEET)
    found = matched(tmp_path, roster, ["Participant_481517_assignsubmission_file_bai14.py"])  # blind marking
    assert keys(found) == {"binh@uni.edu.vn": ["Participant_481517_assignsubmission_file_bai14.py"]}


def test_gradescope_export(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, GRADESCOPE)
    metadata = ("submission_111:\n  :submitters:\n  - :name: Nguyễn Văn An\n    :sid: '20201234'\n"
                "    :email: an@uni.edu.vn\n  :created_at: 2026-11-30 10:00:00.000000000 +07:00\n"
                "  :score: !ruby/object:BigDecimal 18:0.1e2\n"
                "submission_222:\n  :submitters:\n  - :name: Trần Thị Bình\n    :sid: ''\n"
                "    :email: binh@uni.edu.vn\n")
    found = matched(tmp_path, roster, [], folders=("submission_111", "submission_222"), metadata=metadata)
    assert keys(found) == {"20201234": ["submission_111"], "20201235": ["submission_222"]}


def test_plain_names_by_id_email_or_login(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, CANVAS)
    found = matched(tmp_path, roster, ["20201234.ipynb", "binh.tran.py", "nobody.py"])
    assert keys(found) == {"20201234": ["20201234.ipynb"], "20201235": ["binh.tran.py"]}
    assert [(u.path.name, u.reason) for u in found.unmatched] == [("nobody.py", "nobody")]
    assert [m.key for m in found.missing] == ["20201236"]


def test_two_learners_of_one_name_match_nobody(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, "id,name\n1,Nguyễn Văn An\n2,Nguyễn Văn An\n")
    found = matched(tmp_path, roster, ["Nguyễn Văn An.py"])
    assert not found.matched
    assert (found.unmatched[0].reason, found.unmatched[0].candidates) == ("several", ("1", "2"))


# --- the learners a batch grades from the matches ---------------------------------------------

def test_a_learner_of_several_entries_is_graded_from_one_staged_folder(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    roster = roster_of(tmp_path, CANVAS)
    names = ["nguyenvanan_12345_1_ex1_device.py", "nguyenvanan_12345_2_ex2_timing-1.py",  # re-uploaded: "-1"
             "nguyenvanan_12345_3_ex3_roundtrip.py", "nguyenvanan_12345_4_notes.txt"]
    matched(tmp_path, roster, names)
    folder = tmp_path / "submissions"
    (folder / "nguyenvanan_12345_5_big.py").write_bytes(b"#" * 2048)
    (folder / "nguyenvanan_12345_6_link.py").symlink_to("/etc/passwd")
    claims = [claim(p, {}) for p in sorted(folder.iterdir())]
    found = match(roster, claims)
    planned = assign(found, claims, tmp_path / "staged", discover.discover(tmp_path / "submissions"))
    [learner] = planned.learners
    assert learner.id == "20201234" and learner.path == tmp_path / "staged" / "20201234"
    monkeypatch.setattr(discover, "MAX_STAGED_BYTES", 1024)
    stage(planned.sources["20201234"], learner.path)
    assert sorted(p.name for p in learner.path.iterdir()) == [
        "ex1_device.py", "ex2_timing.py", "ex3_roundtrip.py", "notes.txt"]  # no link followed, nothing too big
    assert (learner.path / "ex1_device.py").read_text(encoding="utf-8") == "def pick_device(): ...\n"


def test_an_unmatched_entry_never_takes_a_learners_id(tmp_path: Path) -> None:
    roster = roster_of(tmp_path, 'id,name\n"a b",An\n')
    key = roster.members[0].key
    assert key.startswith("student_id-")  # an id unsafe as a file name gets a stable safe key
    found = matched(tmp_path, roster, [f"{key}.py"])
    claims = [claim(p, {}) for p in sorted((tmp_path / "submissions").iterdir())]
    planned = assign(found, claims, tmp_path / "staged", discover.discover(tmp_path / "submissions"))
    assert [learner.id for learner in planned.learners] == [f"{key}~unmatched"]
