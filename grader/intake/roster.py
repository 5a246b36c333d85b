"""The class roster: read an LMS export as it comes, and say which submission is whose.

A roster is a CSV file exported from the learning platform, or written by hand. Its columns are
found by their headers, whatever their order and case (``HEADERS``): Canvas's gradebook export
(Student, ID, SIS User ID, SIS Login ID, Section, ...), Moodle's (First name, Last name or
Surname, ID number, Email address, ...; its grading worksheet's Identifier "Participant 123"),
Gradescope's roster (First Name, Last Name, SID, Email), a plain ``id,name,email,section``, and
the Vietnamese headers of a university's own lists (MSSV, Họ và tên, Lớp).

The file is what an instructor downloaded, but its cells are what learners typed (their names):
it is read with bounded sizes, any byte sequence is either decoded exactly or refused with a
message that says how to save it, and names are kept exactly as written (accents, case,
spacing); they are compared folded (NFC, case-folded), never stored folded.

Matching (``match``) takes what each submission's name or the platform's metadata says
(grader/intake/downloads.py) and finds the one roster learner it names: by the platform's user id,
the student id, the e-mail, the login, then the name. A rule that names two learners matches
nobody (the instructor decides); a submission that names nobody is graded under its own name and
listed as unmatched.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from grader.errors import GraderError
from grader.intake.discover import Learner
from grader.intake.downloads import Claim
from grader.intake.names import is_learner_id

# Bounds on what is read: a class of 50,000 with long names fits; a 2 GB file is refused unread.
MAX_BYTES = 16 << 20
MAX_ROWS = 50_000
MAX_CELL = 1_000

Column = Literal["canvas_id", "student_id", "login", "email", "name", "sortable", "first", "last",
                 "section", "participant", "role"]

# Header -> column, compared folded (see _fold_header). Canvas's "ID" is its own user id only in
# a Canvas export (whose first column is "Student"); anywhere else "ID" is the student's id.
HEADERS: Mapping[str, Column] = {
    "sis user id": "student_id", "id number": "student_id", "idnumber": "student_id", "sid": "student_id",
    "student id": "student_id", "student number": "student_id", "student_id": "student_id", "id": "student_id",
    "mssv": "student_id", "mã sinh viên": "student_id", "mã số sinh viên": "student_id", "mã sv": "student_id",
    "sis login id": "login", "username": "login", "login": "login", "login id": "login",
    "email": "email", "email address": "email", "e-mail": "email", "e-mail address": "email",
    "name": "name", "full name": "name", "fullname": "name", "student name": "name", "họ và tên": "name",
    "họ tên": "name", "student": "sortable",
    "first name": "first", "firstname": "first", "given name": "first", "tên": "first",
    "last name": "last", "lastname": "last", "surname": "last", "family name": "last", "họ": "last",
    "section": "section", "sections": "section", "group": "section", "groups": "section", "lớp": "section",
    "nhóm": "section", "class": "section",
    "identifier": "participant",
    "role": "role", "roles": "role", "vai trò": "role",
}
# Gradescope's and Moodle's lists hold the staff too; a row with a role keeps only learners.
LEARNER_ROLES = ("student", "learner", "sinh viên", "học viên")
# Which identifier keys a learner's reports and gradebook row, most stable first.
KEY_ORDER: tuple[Column, ...] = ("student_id", "canvas_id", "login", "email")
_SAFE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")
_PARTICIPANT = re.compile(r"(?:participant|người tham gia)\s*(\d+)", re.IGNORECASE)

MatchRule = Literal["canvas_id", "participant", "student_id", "email", "login", "name"]


@dataclass(frozen=True)
class Member:
    """One learner of the roster, as written in it."""

    key: str  # the learner's id in reports and the gradebook (KEY_ORDER), safe as a file name
    line: int  # where in the roster file, for messages
    name: str = ""  # "First Last", or the roster's one name column, exactly as written
    sortable: str = ""  # "Last, First" (Canvas's Student column), when the roster has it
    first: str = ""
    last: str = ""
    email: str = ""
    section: str = ""
    student_id: str = ""
    canvas_id: str = ""
    login: str = ""
    participant: str = ""  # Moodle's per-assignment participant number (grading worksheet)


@dataclass(frozen=True)
class Roster:
    path: str  # the file, absolute: the class list records where its learners came from
    sha256: str  # of the file's bytes: shards merge only if they were given the same roster
    members: tuple[Member, ...]
    columns: Mapping[Column, str] = field(default_factory=dict)  # column -> header found


@dataclass(frozen=True)
class Matched:
    member: Member
    paths: tuple[Path, ...]  # every submission entry of this learner (a Canvas download: one a file)
    rules: tuple[MatchRule, ...]  # how each was matched, in the same order


UnmatchedReason = Literal["nobody", "several"]  # names nobody on the roster; names several learners


@dataclass(frozen=True)
class Unmatched:
    path: Path
    reason: UnmatchedReason
    candidates: tuple[str, ...] = ()  # "several": the learners' keys it names


@dataclass(frozen=True)
class ClassList:
    matched: tuple[Matched, ...]  # sorted by key
    unmatched: tuple[Unmatched, ...]
    missing: tuple[Member, ...]  # on the roster, nothing submitted


# --- reading --------------------------------------------------------------------------------

def _decode(raw: bytes, where: str, encoding: str | None) -> str:
    """The file's text: a BOM says its encoding; else UTF-8; else the encoding the instructor
    names. Never a guess between code pages: a wrong guess would change every accented name."""
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if raw.startswith(bom):
            encoding = codec
            break
    try:
        return raw.decode(encoding or "utf-8")
    except LookupError:
        raise GraderError(f"--roster-encoding: unknown encoding {encoding!r}") from None
    except UnicodeDecodeError as exc:
        if encoding:
            raise GraderError(f"{where} is not {encoding} (byte {raw[exc.start]:#04x} at offset {exc.start})") from None
        raise GraderError(
            f"{where} is not UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start}): save it as "
            "\"CSV UTF-8\", or name its encoding with --roster-encoding (cp1258 for Vietnamese "
            "Windows, cp1252 for Western Europe)") from None


def _fold_header(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).strip().strip('"').casefold().split())


def fold(text: str) -> str:
    """Names and ids compared, never stored: NFC (a Mac writes file names decomposed), case-folded,
    runs of spaces made one."""
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def _rows(text: str) -> list[list[str]]:
    lines = text.splitlines(keepends=True)
    if lines and re.fullmatch(r"sep=(.)\r?\n?", lines[0]):  # Excel's hint line
        delimiters = [lines[0][4]]
        text = "".join(lines[1:])
    else:
        delimiters = [",", ";", "\t"]
    best: list[list[str]] = []
    best_known = -1
    for delimiter in delimiters:
        try:
            rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False))
        except csv.Error as exc:
            raise GraderError(f"not a CSV file: {exc}") from None
        known = sum(1 for cell in (rows[0] if rows else []) if _fold_header(cell) in HEADERS)
        if known > best_known:
            best, best_known = rows, known
    return best


def _columns(header: Sequence[str], where: str) -> dict[Column, int]:
    found: dict[Column, int] = {}
    folded = [_fold_header(cell) for cell in header]
    canvas = len(folded) > 1 and folded[0] == "student" and folded[1] == "id"
    for index, cell in enumerate(folded):
        column: Column | None = HEADERS.get(cell)
        if canvas and cell == "id":
            column = "canvas_id"
        if column is None or column in found:
            continue
        found[column] = index
    if not any(column in found for column in KEY_ORDER) and "participant" not in found:
        raise GraderError(f"{where}: no column identifies a learner: the header {list(header)!r} has none of "
                          "ID, SIS User ID, ID number, SID, MSSV, Email, Username (or Moodle's Identifier)")
    return found


def _key(member: Mapping[Column, str], line: int, where: str) -> str:
    for column in KEY_ORDER:
        value = member.get(column, "")
        if value:
            if _SAFE_KEY.fullmatch(value) and is_learner_id(value):
                return value
            # Still one stable key per learner, safe as a file name.
            return f"{column}-{hashlib.sha256(value.encode()).hexdigest()[:12]}"
    if member.get("participant"):
        return f"participant-{member['participant']}"
    raise GraderError(f"{where}, line {line}: this learner has no id, e-mail or login")


def read_roster(path: Path, encoding: str | None = None) -> Roster:
    where = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise GraderError(f"--roster: cannot read {where}: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise GraderError(f"{where} is larger than {MAX_BYTES >> 20} MiB: not a class roster")
    if b"\0" in raw and not raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise GraderError(f"{where} holds NUL bytes: not a text CSV file (export it again as CSV)")
    text = _decode(raw, where, encoding)
    try:
        rows = _rows(text)
    except GraderError as exc:
        raise GraderError(f"{where}: {exc}") from None
    if not rows:
        raise GraderError(f"{where} is empty")
    if len(rows) > MAX_ROWS + 1:
        raise GraderError(f"{where} has more than {MAX_ROWS} rows: not a class roster")
    columns = _columns(rows[0], where)
    members: list[Member] = []
    seen: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        for cell in row:
            if len(cell) > MAX_CELL:
                raise GraderError(f"{where}, line {line}: a cell is longer than {MAX_CELL} characters")
        values = {column: row[index].strip() if index < len(row) else "" for column, index in columns.items()}
        role = fold(values.get("role", ""))
        if role and not any(word in role for word in LEARNER_ROLES):
            continue  # an instructor, a TA, a reader
        if "Points Possible" in values.get("sortable", "") and not values.get("canvas_id"):
            continue  # Canvas's second row: each assignment's points, no learner
        if not any(values.get(column) for column in (*KEY_ORDER, "participant")):
            if any(values.values()):
                raise GraderError(f"{where}, line {line}: this learner has no id, e-mail or login")
            continue
        participant = _PARTICIPANT.search(values.get("participant", ""))
        values["participant"] = participant.group(1) if participant else ""
        first, last = values.get("first", ""), values.get("last", "")
        sortable = values.get("sortable", "")
        # The roster's own words for the name, never rearranged: Canvas's "Nguyễn, Văn An" stays so.
        name = values.get("name", "") or sortable or " ".join(part for part in (first, last) if part)
        if not sortable and last:
            sortable = f"{last}, {first}" if first else last
        key = _key(values, line, where)
        if key in seen:
            raise GraderError(f"{where}: lines {seen[key]} and {line} are the same learner ({key!r})")
        seen[key] = line
        members.append(Member(key=key, line=line, name=name, sortable=sortable, first=first, last=last,
                              email=values.get("email", ""), section=values.get("section", ""),
                              student_id=values.get("student_id", ""), canvas_id=values.get("canvas_id", ""),
                              login=values.get("login", ""), participant=values["participant"]))
    if not members:
        raise GraderError(f"{where} lists no learner")
    header = rows[0]
    return Roster(str(path.resolve()), hashlib.sha256(raw).hexdigest(), tuple(members),
                  {column: header[index] for column, index in columns.items()})


# --- matching -------------------------------------------------------------------------------

def canvas_compact(name: str) -> str:
    """A name as Canvas writes it into a download's file name: its sortable name without any
    character but letters, digits and marks, lower-cased (content_zipper.rb, sanitize_file_name)."""
    return "".join(ch for ch in unicodedata.normalize("NFC", name)
                   if ch.isalnum() or unicodedata.category(ch).startswith("M") or ch == "_").lower()


def moodle_clean(name: str) -> str:
    """A name as Moodle writes it into a download's file name (str_replace '_' by ' ', then
    clean_filename), folded for comparison."""
    name = name.replace("_", " ")
    return fold(re.sub(r'[\x00-\x1f\x7f/\\:*?"<>|]', "", name))


def _names(member: Member) -> set[str]:
    """Every order a platform may write this learner's name in, folded."""
    names = {member.name, member.sortable.replace(",", " ")}
    surname, comma, given = member.sortable.partition(",")
    if comma:  # Canvas's "Last, First" -> "First Last"
        names.add(f"{given} {surname}")
    if member.first and member.last:
        names |= {f"{member.first} {member.last}", f"{member.last} {member.first}"}
    elif member.name and " " in member.name.strip():
        parts = member.name.split()
        names.add(" ".join(parts[-1:] + parts[:-1]))  # "Nguyễn Văn An" -> "An Nguyễn Văn"
    return {fold(name) for name in names if name.strip()}


class _Index:
    def __init__(self, members: Sequence[Member]) -> None:
        self.by: dict[str, dict[str, list[Member]]] = {}
        for member in members:
            self._add("canvas_id", member.canvas_id, member)
            self._add("participant", member.participant, member)
            self._add("student_id", fold(member.student_id), member)
            self._add("email", fold(member.email), member)
            self._add("login", fold(member.login), member)
            self._add("local", fold(member.email.partition("@")[0]) if "@" in member.email else "", member)
            for name in _names(member):
                self._add("name", name, member)
                self._add("canvas_name", canvas_compact(name), member)
                self._add("moodle_name", moodle_clean(name), member)

    def _add(self, index: str, value: str, member: Member) -> None:
        if value:
            found = self.by.setdefault(index, {}).setdefault(value, [])
            if member not in found:
                found.append(member)

    def get(self, index: str, value: str) -> list[Member]:
        return self.by.get(index, {}).get(value, []) if value else []


def _candidates(claim: Claim, index: _Index) -> Iterable[tuple[MatchRule, list[Member]]]:
    """What the claim says, most certain first."""
    if claim.platform == "canvas":
        yield "canvas_id", index.get("canvas_id", claim.user_id)
        yield "name", index.get("canvas_name", claim.name)
    elif claim.platform == "moodle":
        yield "participant", index.get("participant", claim.user_id)
        yield "name", index.get("moodle_name", moodle_clean(claim.name))
    elif claim.platform == "gradescope":
        for who in claim.submitters:
            yield "student_id", index.get("student_id", fold(who.sid))
            yield "email", index.get("email", fold(who.email))
            yield "name", index.get("name", fold(who.name))
    stem = fold(claim.stem)
    for rule, name in (("student_id", "student_id"), ("canvas_id", "canvas_id"), ("email", "email"),
                       ("login", "login"), ("email", "local"), ("name", "name")):
        yield rule, index.get(name, stem)  # type: ignore[misc]


def _one(claim: Claim, index: _Index) -> tuple[MatchRule, Member] | list[Member]:
    """The learner the claim names by its most certain rule that names exactly one; else the
    learners of the first rule that named several (maybe none)."""
    ambiguous: list[Member] = []
    for rule, members in _candidates(claim, index):
        if len(members) == 1:
            return rule, members[0]
        if len(members) > 1 and not ambiguous:
            ambiguous = members
    return ambiguous


def match(roster: Roster, claims: Sequence[Claim]) -> ClassList:
    index = _Index(roster.members)
    found: dict[str, list[tuple[Path, MatchRule]]] = {}
    unmatched: list[Unmatched] = []
    for claim in claims:
        result = _one(claim, index)
        if isinstance(result, tuple):
            rule, member = result
            found.setdefault(member.key, []).append((claim.path, rule))
        elif result:
            unmatched.append(Unmatched(claim.path, "several", tuple(m.key for m in result)))
        else:
            unmatched.append(Unmatched(claim.path, "nobody"))
    by_key = {member.key: member for member in roster.members}
    matched = tuple(Matched(by_key[key], tuple(p for p, _ in entries), tuple(r for _, r in entries))
                    for key, entries in sorted(found.items()))
    missing = tuple(member for member in roster.members if member.key not in found)
    return ClassList(matched, tuple(unmatched), missing)


# --- the learners a batch grades ------------------------------------------------------------

@dataclass(frozen=True)
class Assignment:
    learners: tuple[Learner, ...]  # sorted by name: the roster's keys, then unmatched entries' names
    # A learner with several entries: each entry and the name its file gets in the learner's staged
    # folder (discover.stage), which is the Learner's path.
    sources: Mapping[str, tuple[tuple[Path, str], ...]]
    unmatched_ids: Mapping[Path, str]  # an unmatched entry -> the learner id its report gets


_CANVAS_COPY = re.compile(r"-\d+(?=\.[^.]+$)")  # Canvas renames a re-uploaded ex1_device.py ex1_device-1.py


def _own_name(claim: Claim) -> str:
    return claim.file or claim.path.name


def assign(found: ClassList, claims: Sequence[Claim], staging: Path, discovered: Sequence[Learner]) -> Assignment:
    """Who is graded from what: each matched learner under their roster key (from their one entry,
    or from a folder staged under ``staging`` from all of them), each unmatched entry under its own
    id (as without a roster: ``discovered``, grader/intake/discover.py)."""
    by_path = {claim.path: claim for claim in claims}
    entry_of = {learner.path: learner for learner in discovered}
    learners: list[Learner] = []
    sources: dict[str, tuple[tuple[Path, str], ...]] = {}
    for matched in found.matched:
        key = matched.member.key
        if len(matched.paths) == 1:
            learners.append(Learner(key, matched.paths[0], entry_of[matched.paths[0]].submitted_as))
            continue
        names = [_own_name(by_path[path]) for path in matched.paths]
        given: list[tuple[Path, str]] = []
        for path, own in zip(matched.paths, names, strict=True):
            plain = _CANVAS_COPY.sub("", own)
            renamed = by_path[path].platform == "canvas" and plain != own and plain not in names
            given.append((path, plain if renamed else own))
        sources[key] = tuple(given)
        learners.append(Learner(key, staging / key, "; ".join(entry_of[path].submitted_as for path in matched.paths)))
    # Every learner of the roster, graded or not: a report under a roster key is that learner's.
    keys = {matched.member.key for matched in found.matched} | {member.key for member in found.missing}
    unmatched_ids: dict[Path, str] = {}
    for entry in found.unmatched:
        name = entry_of[entry.path].id
        while name in keys:  # never another learner's report
            name += "~unmatched"
        keys.add(name)
        unmatched_ids[entry.path] = name
        learners.append(Learner(name, entry.path, entry_of[entry.path].submitted_as))
    return Assignment(tuple(sorted(learners, key=lambda learner: learner.id)), sources, unmatched_ids)
