"""Names and text a learner controls, made safe once: ``shown`` for every screen, file and page the
grader writes, and learner ids that any file name becomes.

**Shown, never interpreted.** A learner's file name, exception text or printed output may hold
escape sequences (a window title, a cleared screen, colours), bare carriage returns, a newline and a
forged ``Score: 100.0 / 100.0`` line, bidi overrides, or bytes that are not UTF-8 (a zip made on
Windows). ``shown`` writes each character that a terminal, an editor or a browser would act on
rather than show as its escape (``\\x1b``, ``\\r``, ``\\u202e``; an undecodable byte as ``\\xe9``), so
what the learner wrote stays readable and does nothing. Every report text built from the learner's
words goes through it (grader/score/texts ``render``, grader/grading.py), and every output applies
it again where it writes (the terminal, the class summary, results.json), so an old report read back
is shown the same way.

**Ids.** A learner's id is the name of their file or folder without its extension (the contract),
when that name is an ordinary one. Any name a file system holds reaches the grader — 242 bytes
(its report's temporary name passed 255 and stopped the batch), newlines, escapes, formulas, a
leading dot, ``gradebook`` and ``summary`` (the class files' names), ``alice.py`` beside ``alice/`` —
and the id names the report file, the gradebook row and the summary's lines, so an id is always:

* printable on one line, starting with a letter, a digit or ``_`` (never ``= + - @``, a tab, a
  carriage return — a spreadsheet formula —, a dot — a hidden file — or a space);
* a file name every system accepts: none of ``< > : " / \\ | ? *``, not ending in a dot or a space,
  at most ``MAX_ID_BYTES`` bytes, so ``.<id>.yaml.<random>`` stays far below 255 bytes;
* not a class file's name (``RESERVED``), in any case;
* unique in the class, case-blind (the output folder copied to a Mac or to Windows keeps every report).

Any other name becomes ``<what is left of it>-<8 hex digits of the SHA-256 of its bytes>``: the same
name always gets the same id, so a re-run finds its report. When entries would share an id
(``alice.py`` beside ``alice/``), each takes its whole name instead (``alice.py``, ``alice``), and a
hashed one if that still clashes. The original name, shown, stays in the report (``submitted_as``)
and in the gradebook row.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping

MAX_ID_BYTES = 100
RESERVED = frozenset({"summary", "gradebook", "roster"})  # the class files' stems (grader/outputs/)
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NOT_IN_FILE_NAMES = frozenset('<>:"/\\|?*')
_SURROGATE_ESCAPES = range(0xDC80, 0xDD00)  # os.fsdecode's stand-ins for bytes that are not UTF-8
_SLUG_JUNK = re.compile(r"[^\w.-]+")


def shown(text: str, *, keep: str = "") -> str:
    """``text`` with every character that is not printable written as its escape; ``keep`` names
    those left as they are (``"\\n"`` for a multi-line text in a YAML report).

    Not printable (``str.isprintable``): C0 and C1 controls and DEL, format characters (bidi
    overrides, zero-width joiners), line and paragraph separators, lone surrogates, unassigned and
    private-use code points, and spaces other than U+0020. The result is one line unless ``keep``
    holds a newline, and encodes as UTF-8 whatever ``text`` held."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable() or char in keep:
            out.append(char)
            continue
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code in _SURROGATE_ESCAPES:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def _ordinary(stem: str) -> bool:
    return (bool(stem) and stem.isprintable() and (stem[0].isalnum() or stem[0] == "_")
            and not stem.endswith((" ", ".")) and not _NOT_IN_FILE_NAMES.intersection(stem)
            and len(stem.encode("utf-8")) <= MAX_ID_BYTES and stem.casefold() not in RESERVED)


def _hashed(name: str, stem: str) -> str:
    """What is left of ``stem`` (letters, digits, ``_ . -``), then the hash of the whole name's bytes."""
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:8]
    kept = "".join(c for c in unicodedata.normalize("NFC", stem) if c.isprintable())
    slug = _SLUG_JUNK.sub("_", kept).strip("._- ")
    while len(slug.encode("utf-8")) > MAX_ID_BYTES - 9:
        slug = slug[:-1]
    return f"{slug.rstrip('._- ') or 'learner'}-{digest}"


def learner_id(name: str, *, is_dir: bool) -> str:
    """The id of a class folder's entry ``name`` (as ``os.listdir`` gives it), alone in its class."""
    stem = name if is_dir or "." not in name[1:] else name[: name.rindex(".")]
    return stem if _ordinary(stem) else _hashed(name, stem)


def class_ids(entries: Iterable[tuple[str, bool]]) -> dict[str, str]:
    """Entry name -> id for every entry (name, is_dir) of one class folder: unique, case-blind."""
    entries = list(entries)
    ids = {name: learner_id(name, is_dir=is_dir) for name, is_dir in entries}
    for attempt in (_whole_name, _hashed_name):
        clashes = _clashing(ids)
        if not clashes:
            break
        for name in clashes:
            ids[name] = attempt(name)
    return ids


def _whole_name(name: str) -> str:
    """A clash's first way out: the whole name (``an.py`` beside ``an``), when it is ordinary."""
    return name if _ordinary(name) else _hashed(name, name)


def _hashed_name(name: str) -> str:
    return _hashed(name, name)


def _clashing(ids: Mapping[str, str]) -> set[str]:
    seen: dict[str, list[str]] = {}
    for name, learner in ids.items():
        seen.setdefault(learner.casefold(), []).append(name)
    return {name for names in seen.values() if len(names) > 1 for name in names}


def submitted_as(name: str) -> str:
    """The original name of a learner's entry, as the report and the gradebook keep it."""
    return shown(name)


def is_learner_id(text: str) -> bool:
    """Whether ``text`` can be a learner id: every id is an ordinary name, hashed ones included (a
    report read back that names anything else is not one the grader wrote)."""
    return _ordinary(text)
