"""A batch's reports, sealed: what each was graded from (``Stamp``) and an HMAC over all of it.

A batch adds a ``Stamp`` to each learner's report (the submission's and the course's hashes, the
grader's version, the language, the requested device) and a seal: an HMAC of the whole report
under a key kept in the output folder (``SEAL_FILE``, 0600), which a learner's code never sees. A
report whose seal does not match — changed by hand, or by anything but the grader — is not
current: the next batch run regrades it, and ``grader merge`` refuses it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import yamltext
from grader.course import Lang, lang_of
from grader.outputs.report import ReportError, as_dict, from_dict, write_atomic
from grader.score.results import Report
from grader.wire.messages import REQUESTED_DEVICES, RequestedDevice

SEAL_FILE = ".grader-seal"  # in a batch's output folder: the key its reports are sealed with


@dataclass(frozen=True)
class Stamp:
    """What a batch adds to a learner's report: what it was graded from. A re-run regrades the
    learner when any of it differs."""

    submission_sha256: str
    course_sha256: str
    grader_version: str
    lang: Lang
    requested_device: RequestedDevice


@dataclass(frozen=True)
class StoredReport:
    report: Report
    stamp: Stamp | None = None
    seal: str = ""  # HMAC of the report and its stamp under the output folder's key
_STAMP_KEYS = ("submission_sha256", "course_sha256", "grader_version", "lang", "requested_device")


def stored_dict(stored: StoredReport) -> dict[str, Any]:
    """The mapping written to the YAML file: the report, its stamp and its seal."""
    data = as_dict(stored.report)
    if stored.stamp is not None:
        data.update({key: getattr(stored.stamp, key) for key in _STAMP_KEYS})
    if stored.seal:
        data["seal"] = stored.seal
    return data


def seal_of(stored: StoredReport, key: bytes) -> str:
    """The HMAC of everything in the file but the seal itself."""
    unsealed = stored_dict(StoredReport(stored.report, stored.stamp))
    canonical = json.dumps(unsealed, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()


def sealed(stored: StoredReport, key: bytes) -> StoredReport:
    return StoredReport(stored.report, stored.stamp, seal_of(stored, key))


def seal_intact(stored: StoredReport, key: bytes) -> bool:
    return bool(stored.seal) and hmac.compare_digest(stored.seal, seal_of(stored, key))


def seal_key(folder: Path, *, create: bool) -> bytes | None:
    """The output folder's key (made on first use, readable by the grader's user only)."""
    path = folder / SEAL_FILE
    try:
        return bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        if not create:
            return None
    folder.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(key.hex())
    return key


def load_report(path: Path) -> StoredReport | None:
    """A learner report the grader wrote, typed; None when the file is not one."""
    try:
        data = yamltext.load(path.read_text(encoding="utf-8"))
        report = from_dict(data)
    except (OSError, UnicodeDecodeError, yamltext.YAMLError, ReportError, TypeError, ValueError, AttributeError,
            RecursionError):  # whatever a file in the output folder holds, it is read as "not a report"
        return None
    stamp = None
    lang, device = lang_of(data.get("lang")), next((d for d in REQUESTED_DEVICES if d == data.get("requested_device")),
                                                   None)
    if all(isinstance(data.get(key), str) for key in _STAMP_KEYS) and lang is not None and device is not None:
        stamp = Stamp(data["submission_sha256"], data["course_sha256"], data["grader_version"], lang, device)
    return StoredReport(report, stamp, str(data.get("seal") or ""))


def write_stored(path: Path, stored: StoredReport) -> None:
    write_atomic(path, yamltext.dump(stored_dict(stored)))
