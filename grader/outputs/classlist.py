"""The class list of a batch graded with a roster: who is on it, which submission is whose.

``grader batch --roster`` writes it as ``roster.yaml`` in the output folder before grading; the
gradebook and the summary read it to list every learner of the roster (those who submitted nothing
too), ``grader merge`` carries it (every shard must have been given the same roster), and
``grader export`` builds the platform's grade file from it and the reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, cast, get_args

from grader import yamltext
from grader.errors import GraderError
from grader.intake.roster import ClassList, Member, Roster, UnmatchedReason
from grader.outputs.report import write_atomic

RECORD_STEM = "roster"
RECORD_FILE = f"{RECORD_STEM}.yaml"
MAX_RECORD_BYTES = 64 << 20
# What a learner on the roster who submitted nothing gets in the gradebook and the LMS files: a 0,
# or an empty cell (no grade; the platform keeps what it had).
MissingPolicy = Literal["zero", "empty"]
MISSING_POLICIES: tuple[MissingPolicy, ...] = get_args(MissingPolicy)


@dataclass(frozen=True)
class Unassigned:
    """A submission that matched nobody on the roster: graded under its own name."""

    learner: str  # its report's learner id (the file or folder name without extension)
    submission: str  # the entry's name in the submissions folder
    reason: UnmatchedReason
    candidates: tuple[str, ...] = ()  # "several": the roster keys it names


@dataclass(frozen=True)
class ClassRecord:
    source: str  # the roster file, absolute
    sha256: str
    missing: MissingPolicy
    members: tuple[Member, ...]  # in the roster's order
    submissions: Mapping[str, tuple[str, ...]]  # member key -> entry names (sorted), who submitted
    matched_by: Mapping[str, tuple[str, ...]]  # member key -> how each entry was matched
    unmatched: tuple[Unassigned, ...]

    def member(self, key: str) -> Member | None:
        return next((m for m in self.members if m.key == key), None)


def record_of(roster: Roster, found: ClassList, missing: MissingPolicy,
              unmatched_ids: Mapping[Path, str]) -> ClassRecord:
    return ClassRecord(
        roster.path, roster.sha256, missing, roster.members,
        {m.member.key: tuple(p.name for p in m.paths) for m in found.matched},
        {m.member.key: tuple(m.rules) for m in found.matched},
        tuple(Unassigned(unmatched_ids[u.path], u.path.name, u.reason, u.candidates) for u in found.unmatched),
    )


def _member_dict(member: Member) -> dict[str, Any]:
    return {f.name: getattr(member, f.name) for f in fields(Member)
            if getattr(member, f.name) not in ("", None) or f.name in ("key", "line")}


def as_dict(record: ClassRecord) -> dict[str, Any]:
    return {
        "kind": "roster",
        "source": record.source,
        "sha256": record.sha256,
        "missing": record.missing,
        "members": [{**_member_dict(m), "submissions": list(record.submissions.get(m.key, ())),
                     "matched_by": list(record.matched_by.get(m.key, ()))} for m in record.members],
        "unmatched": [{"learner": u.learner, "submission": u.submission, "reason": u.reason,
                       **({"candidates": list(u.candidates)} if u.candidates else {})}
                      for u in record.unmatched],
    }


def write_record(record: ClassRecord, out_dir: Path) -> None:
    write_atomic(out_dir / RECORD_FILE, yamltext.dump(as_dict(record), width=120))


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise GraderError(f"{where}: {key!r} must be text")
    return str(value)


def _texts(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GraderError(f"{where}: {key!r} must be a list of text")
    return tuple(value)


def load_record(out_dir: Path) -> ClassRecord | None:
    """The folder's class list; None when the batch had no roster."""
    path = out_dir / RECORD_FILE
    if not path.exists():
        return None
    where = str(path)
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise GraderError(f"{where} is too large to be a class list")
        data = yamltext.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yamltext.YAMLError) as exc:
        raise GraderError(f"{where} is not readable ({type(exc).__name__}); run the batch again") from None
    if not isinstance(data, dict) or data.get("kind") != "roster":
        raise GraderError(f"{where} is not a grader class list")
    missing = data.get("missing")
    if missing not in MISSING_POLICIES:
        raise GraderError(f"{where}: 'missing' must be one of {', '.join(MISSING_POLICIES)}")
    members: list[Member] = []
    submissions: dict[str, tuple[str, ...]] = {}
    matched_by: dict[str, tuple[str, ...]] = {}
    names = {f.name for f in fields(Member)}
    for index, raw in enumerate(data.get("members") or []):
        at = f"{where}, members[{index}]"
        if not isinstance(raw, dict):
            raise GraderError(f"{at} must be a mapping")
        line = raw.get("line")
        if not isinstance(line, int):
            raise GraderError(f"{at}: 'line' must be a number")
        values = {name: _text(raw, name, at) for name in names - {"line"}}
        member = Member(line=line, **values)
        members.append(member)
        submissions[member.key] = _texts(raw, "submissions", at)
        matched_by[member.key] = _texts(raw, "matched_by", at)
    unmatched = []
    for raw in data.get("unmatched") or []:
        if not isinstance(raw, dict) or raw.get("reason") not in get_args(UnmatchedReason):
            raise GraderError(f"{where}: 'unmatched' holds an entry that is not one")
        unmatched.append(Unassigned(_text(raw, "learner", where), _text(raw, "submission", where),
                                    cast(UnmatchedReason, raw["reason"]), _texts(raw, "candidates", where)))
    return ClassRecord(_text(data, "source", where), _text(data, "sha256", where), missing, tuple(members),
                       {k: v for k, v in submissions.items() if v}, {k: v for k, v in matched_by.items() if v},
                       tuple(unmatched))
