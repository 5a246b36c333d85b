"""The YAML report: written atomically, read back typed, sealed in a batch; the terminal summary.

A report is written from a ``Report`` (``as_dict``) and read back into one (``load_report``):
batch, merge, the gradebook and the class summary all use the typed value, never the raw YAML. A
batch adds a ``Stamp`` (what the report was graded from) and a seal: an HMAC of the whole report
under a key kept in the output folder (``SEAL_FILE``), which a learner's code never sees. A
report whose seal does not match — changed by hand, or by anything but the grader — is not
current, and the next batch run regrades it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from grader import yamltext
from grader.course import Lang, Visibility
from grader.intake.names import is_learner_id
from grader.score.results import (
    CheckMode,
    CheckResult,
    DeviceInfo,
    ExerciseResult,
    ExerciseStatus,
    GradedDevice,
    IsolationInfo,
    IsolationMode,
    Report,
    TopLevelStop,
)
from grader.wire.messages import CheckStatus, StopKind


def _check(check: CheckResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": check.id,
        "status": check.status,
        "points": check.points,
        "max_points": check.max_points,
        "message": check.message,
    }
    if check.hint:
        data["hint"] = check.hint
    data["mode"] = check.mode
    if check.devices:
        data["devices"] = list(check.devices)
    data["visibility"] = check.visibility
    data["seconds"] = round(check.duration_s, 3)
    return data


def as_dict(report: Report) -> dict[str, Any]:
    device: dict[str, Any] = {"type": report.device.type, "name": report.device.name,
                              "torch": report.device.torch, "standin": report.device.standin}
    return {
        "learner": report.learner,
        "submitted_as": report.submitted_as,
        "submission": report.submission,
        "score": report.score,
        "max_score": report.max_score,
        "device": device,
        "lang": report.lang,
        "grading_seconds": report.grading_seconds,
        "learner_seconds": report.learner_seconds,
        "grader_version": report.grader_version,
        "seed": report.seed,
        "notes": list(report.notes),
        "grader_error": report.grader_error or None,
        "isolation": {"mode": report.isolation.mode, **({"missing": list(report.isolation.missing)}
                                                         if report.isolation.missing else {})},
        # The learner's cells that stopped (no points lost): once here, never inside a check.
        "top_level": [
            {"where": stop.where, "kind": stop.kind, "error": stop.error, "message": stop.message,
             **({"kept": list(stop.kept)} if stop.kept else {})}
            for stop in report.top_level
        ],
        "output": report.output,
        "exercises": {
            ex.id: {
                "title": ex.title,
                "score": ex.score,
                "max_score": ex.max_score,
                "status": ex.status,
                "checks": [_check(c) for c in ex.checks],
            }
            for ex in report.exercises
        },
    }


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_yaml(report: Report, path: Path) -> None:
    write_atomic(path, yamltext.dump(as_dict(report)))


# -- reading reports back ---------------------------------------------------------------------
class ReportError(ValueError):
    """A YAML file that is not a report the grader wrote."""


def _field(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ReportError(f"{where}: {key!r} is {value!r}")
    return value


def _number(data: Mapping[str, Any], key: str, where: str) -> float:
    return float(_field(data, key, (int, float), where))


def _literal(value: Any, literal: Any, where: str) -> Any:
    if value not in get_args(literal):
        raise ReportError(f"{where}: {value!r} is not one of {get_args(literal)}")
    return value


def _check_from(data: Any, where: str) -> CheckResult:
    if not isinstance(data, Mapping):
        raise ReportError(f"{where}: not a mapping")
    mode = data.get("mode")
    return CheckResult(
        id=_field(data, "id", str, where), status=_literal(data.get("status"), CheckStatus, where),
        points=_number(data, "points", where), max_points=_number(data, "max_points", where),
        message=str(data.get("message") or ""), hint=str(data.get("hint") or ""),
        mode=None if mode is None else _literal(mode, CheckMode, where),
        visibility=_literal(data.get("visibility", "public"), Visibility, where),
        duration_s=float(data.get("seconds") or 0.0), devices=tuple(str(d) for d in data.get("devices") or ()),
    )


def from_dict(data: Any) -> Report:
    """The Report a YAML mapping holds (the inverse of ``as_dict``); ReportError when it holds none."""
    if not isinstance(data, Mapping):
        raise ReportError("not a mapping")
    device = _field(data, "device", Mapping, "report")
    found = data.get("isolation")
    isolation: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    exercises = []
    for ex_id, ex in _field(data, "exercises", Mapping, "report").items():
        where = f"exercise {ex_id}"
        if not isinstance(ex, Mapping):
            raise ReportError(f"{where}: not a mapping")
        checks = tuple(_check_from(c, f"{where} check") for c in _field(ex, "checks", list, where))
        exercises.append(ExerciseResult(str(ex_id), str(ex.get("title") or ""),
                                        _literal(ex.get("status"), ExerciseStatus, where),
                                        _number(ex, "score", where), _number(ex, "max_score", where), checks))
    stops = tuple(TopLevelStop(str(s.get("where", "")), _literal(s.get("kind"), StopKind, "top_level"),
                               str(s.get("error", "")), str(s.get("message", "")),
                               tuple(str(k) for k in s.get("kept") or ()))
                  for s in data.get("top_level") or () if isinstance(s, Mapping))
    learner = _field(data, "learner", str, "report")
    if not is_learner_id(learner):  # an id names a file beside the report: only one the grader made
        raise ReportError(f"report: {learner!r} is not a learner id")
    return Report(
        learner=learner, submission=str(data.get("submission") or ""),
        submitted_as=str(data.get("submitted_as") or ""),
        score=_number(data, "score", "report"), max_score=_number(data, "max_score", "report"),
        device=DeviceInfo(_literal(device.get("type"), GradedDevice, "device"), str(device.get("name", "")),
                          str(device.get("torch", "")), bool(device.get("standin", False))),
        exercises=tuple(exercises), lang=_literal(data.get("lang") or "vi", Lang, "report"),
        grading_seconds=float(data.get("grading_seconds") or 0.0), grader_version=str(data.get("grader_version") or ""),
        learner_seconds=float(data.get("learner_seconds") or 0.0), seed=_seed(data.get("seed")),
        notes=tuple(str(n) for n in data.get("notes") or ()), output=str(data.get("output") or ""),
        grader_error=str(data.get("grader_error") or ""), top_level=stops,
        isolation=IsolationInfo(_literal(isolation.get("mode", "none"), IsolationMode, "isolation"),
                                tuple(str(m) for m in isolation.get("missing") or ())),
    )


def _seed(value: Any) -> int:
    """A report's seed: a non-negative int (a report from before seeds: 0)."""
    return value if type(value) is int and value >= 0 else 0
