"""What a downloaded submission's name says about who submitted it.

Each learning platform's "download all submissions" names its files in its own shape; the shapes
below are taken from each platform's source (docs/instructors.md, "Which file is whose"):

- **Canvas** (``app/models/content_zipper.rb``): ``<name>[_late]_<user id>_<attachment id>_<file>``,
  where ``<name>`` is the learner's sortable name ("Last, First") with every character but
  letters, digits and marks removed, lower-cased — ``nguyenvanan_12345_6789012_bai14.ipynb``,
  ``nguyenvanan_late_12345_6789012_bai14.ipynb`` (the whole prefix is lower-cased, so "LATE"
  reads "late"; older exports kept "LATE"). Anonymous grading drops the name:
  ``12345_6789012_bai14.ipynb``. A learner who uploaded three files has three entries.
- **Moodle** (``mod/assign/locallib.php``, ``download_submissions``): ``<Full Name>_<participant
  number>_assignsubmission_file_<file>``, or, with "Download submissions in folders", a folder
  ``<Full Name>_<participant number>_assignsubmission_file_`` holding the learner's files. The
  number is the learner's number in this assignment (the grading worksheet's "Participant N"),
  not their user id; blind marking writes "Participant" for the name.
- **Gradescope** ("Export Submissions"): one folder ``submission_<n>`` per submission and one
  ``submission_metadata.yml`` naming each folder's submitters (``:name:``, ``:sid:``,
  ``:email:``), as otter-grader's ``GradescopeParser`` reads it.
- anything else: the file or folder name itself (``20201234.ipynb``, ``an.nguyen@uni.edu.py``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

Platform = Literal["canvas", "moodle", "gradescope", "plain"]

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_METADATA_BYTES = 16 << 20

_CANVAS = re.compile(r"^(?:(?P<name>\w*?)_)??(?:(?P<late>late|LATE)_)?(?P<user>\d+)_(?P<attachment>\d+)_(?P<file>.+)$")
_MOODLE = re.compile(r"^(?P<name>.+?)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<file>.*)$")
_GRADESCOPE = re.compile(r"^submission_\d+$")


@dataclass(frozen=True)
class Submitter:
    name: str = ""
    sid: str = ""
    email: str = ""


@dataclass(frozen=True)
class Claim:
    """Who one entry of the submissions folder says it belongs to."""

    path: Path
    platform: Platform
    stem: str  # the entry's name without its extension (plain matching)
    user_id: str = ""  # Canvas: the user id; Moodle: the participant number
    name: str = ""  # the name the platform wrote (Canvas: compacted; Moodle: full name)
    file: str = ""  # the learner's own file name inside the platform's name ("" for a folder)
    late: bool = False
    submitters: tuple[Submitter, ...] = ()  # Gradescope


class _Lenient(yaml.SafeLoader):
    """Gradescope's metadata is written by Ruby; a Ruby-tagged value is read as plain data."""


def _untagged(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Lenient.add_multi_constructor("!", _untagged)


def gradescope_metadata(folder: Path) -> Mapping[str, tuple[Submitter, ...]]:
    """Folder name -> its submitters, from Gradescope's submission_metadata.yml ({} without one)."""
    path = folder / GRADESCOPE_METADATA
    if not path.is_file():
        return {}
    if path.stat().st_size > MAX_METADATA_BYTES:
        return {}
    try:
        data = yaml.load(path.read_text(encoding="utf-8", errors="replace"), Loader=_Lenient)  # noqa: S506
    except yaml.YAMLError:
        return {}
    found: dict[str, tuple[Submitter, ...]] = {}
    if not isinstance(data, dict):
        return found
    for folder_name, entry in data.items():
        if not isinstance(entry, dict):
            continue
        people = entry.get(":submitters") or entry.get("submitters") or []
        if not isinstance(people, list):
            continue
        found[str(folder_name)] = tuple(
            Submitter(*(str(person.get(f":{key}") or person.get(key) or "") for key in ("name", "sid", "email")))
            for person in people if isinstance(person, dict))
    return found


def claim(path: Path, gradescope: Mapping[str, tuple[Submitter, ...]]) -> Claim:
    # A Mac unzips names decomposed (NFD); the platforms wrote them composed.
    name = unicodedata.normalize("NFC", path.name)
    stem = Path(name).stem if path.is_file() else name
    if path.is_dir() and _GRADESCOPE.match(name) and name in gradescope:
        return Claim(path, "gradescope", stem, submitters=gradescope[name])
    if (found := _MOODLE.match(name)) is not None:
        return Claim(path, "moodle", stem, user_id=found["participant"], name=found["name"], file=found["file"])
    if path.is_file() and (found := _CANVAS.match(name)) is not None:
        return Claim(path, "canvas", stem, user_id=found["user"], name=found["name"] or "", file=found["file"],
                     late=found["late"] is not None)
    return Claim(path, "plain", stem)
