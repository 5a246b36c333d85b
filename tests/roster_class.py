"""A class as Canvas hands it to its instructor: the gradebook export (the roster) and the files of
"Download Submissions", named as app/models/content_zipper.rb names them. Graded once per test run
by the ``roster_class`` fixture (tests/conftest.py) and again, in shards, on Slurm (tests/test_slurm.py).

- Nguyễn Văn An uploaded the five exercise files one by one (five entries), ex2 twice, so Canvas
  named its second copy ``ex2_timing-1.py``: graded from one staged folder, 100 points.
- Trần Thị Bình submitted late one file with a known mistake (ex3, the result left on the device).
- Lê Công and "=HYPERLINK(...)" (a name a spreadsheet would run) submitted nothing.
- ghost matches nobody on the roster: a Canvas user id the roster does not have.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.submissions.catalog import ROOT

ROSTER = (
    '"Student","ID","SIS User ID","SIS Login ID","Section","Bài 14 (5566)"\n'
    '"    Points Possible","","","","","100.00"\n'
    '"Nguyễn, Văn An","12345","20201234","an.nguyen","L01",""\n'
    '"Trần, Thị Bình","12346","20201235","binh.tran","L01",""\n'
    '"Lê, Công","12347","20201236","cong.le","L02",""\n'
    '"=HYPERLINK(""http://evil.example""), Eve","12348","20201237","eve","L02",""\n'
)
SOLUTIONS = ROOT / "solutions"
MISTAKE = ROOT / "tests" / "submissions" / "mistakes" / "ex3_roundtrip" / "left_on_device.py"
FILES = {
    "nguyễnvănan_12345_800001_ex1_device.py": SOLUTIONS / "ex1_device.py",
    "nguyễnvănan_12345_800002_ex2_timing-1.py": SOLUTIONS / "ex2_timing.py",
    "nguyễnvănan_12345_800003_ex3_roundtrip.py": SOLUTIONS / "ex3_roundtrip.py",
    "nguyễnvănan_12345_800004_ex4_oom.py": SOLUTIONS / "ex4_oom.py",
    "nguyễnvănan_12345_800005_ex5_amp.py": SOLUTIONS / "ex5_amp.py",
    "trầnthịbình_late_12346_800006_ex3_roundtrip.py": MISTAKE,
    "ghost_99999_800007_ex1_device.py": ROOT / "exercises" / "ex1_device.py",
}


@dataclass(frozen=True)
class RosterClass:
    submissions: Path
    roster: Path
    out: Path  # `grader batch submissions -o out --roster roster.csv`


def build(root: Path) -> tuple[Path, Path]:
    """The submissions folder and the roster, written under ``root``."""
    submissions = root / "submissions"
    submissions.mkdir(parents=True)
    for name, source in FILES.items():
        shutil.copy(source, submissions / name)
    roster = root / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8-sig")  # Excel's BOM, as a re-saved export has
    return submissions, roster
