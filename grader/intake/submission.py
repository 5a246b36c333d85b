"""Load a submission: turn a learner's path into Python sources, cut into the cells that run.

A submission is a `.py` file, a `.ipynb` notebook, or a folder of per-exercise files.
This stage only reads, rewrites and splits text: the grader's own process never runs a line
of learner code, so every learner mistake found here (bad bytes, broken notebook JSON) becomes
a `LoadProblem` for the exercises it spoils, never an exception.

The sandbox runs a source cell by cell, in order, in one namespace, as Jupyter's "Run all"
does (grader/learner/toplevel.py): a cell that fails is recorded and the next one runs. The cells are:
- a notebook's code cells, labelled `In [8]` when saved with an execution count, else `cell k`
  (k counts code cells only);
- a `.py` exported from Jupyter (`# In[8]:` markers) or in the percent format (`# %%`, as
  VS Code and jupytext write it): the same cells as the notebook's;
- any other `.py` (Colab's "Download .py" included): its top-level statements, each labelled
  `line N`. When the file does not parse, its statements are found by their column-0 starts, so
  one broken function costs only itself.

IPython syntax (magics, shell escapes, `obj?` help) becomes the calls IPython itself makes of
it — `get_ipython().system(...)`, `get_ipython().run_line_magic(...)`, `...getoutput(...)` —
which the sandbox's stand-in kernel answers (grader/learner/kernel.py). The rewriting keeps the line
count, so a line number in a traceback still points at the learner's own line and cell.

A top-level `if __name__ == "__main__":` block never runs: each source is imported under its
module name (`submission`, `ex1_device`, ...), never as `__main__`.
"""

from __future__ import annotations

import ast
import codecs
import errno
import io
import json
import keyword
import os
import re
import stat
import tokenize
import unicodedata
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from grader.errors import GraderError
from grader.intake.names import learner_id, shown, submitted_as
from grader.wire.ipython import LexState, as_comment, neutralise, scan
from grader.wire.messages import Cell, Source

ProblemKind = Literal["empty", "undecodable", "bad_notebook", "unsupported", "link", "too_large"]

SINGLE_MODULE = "submission"
MAX_HELPERS = 32  # a folder's other modules an exercise may import (``helpers_of``)


# Tools leave these next to the learner's work; they are never the submission itself.
IGNORED_NAMES = frozenset({"__pycache__", ".ipynb_checkpoints"})
SUFFIXES = (".py", ".ipynb")  # what a submission's files are

_MAX_DETAIL = 200
MiB = 1024 * 1024
# course.yaml ``limits.submission_mb`` (grader/wire/messages.py Limits): a file past it is not read.
DEFAULT_MAX_BYTES = 64 * MiB
# A folder's entries the loader looks at: a learner's folder holds a handful; one of a million
# entries is read no further than this.
MAX_FOLDER_ENTRIES = 1000

# PEP 263: a coding declaration counts only on the first two lines.
_CODING_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
# Cell markers of exported notebooks: `jupyter nbconvert --to script` and the percent format.
_IN_MARKER = re.compile(r"^#\s*In\[\s*(?P<count>\d*)\s*\]:?\s*$")
_PERCENT_MARKER = re.compile(r"^#\s*%%(?!%)(?P<rest>.*)$")
# Lines at column 0 that continue a compound statement rather than start one.
_CONTINUATION = re.compile(r"^(else|elif|except|finally)\b|^[)\]}]")
# Lines at column 0 that start a statement even after an unclosed bracket (the syntax error).
_DEFINITION = re.compile(r"^(async\s+def|def|class|import|from|if|for|while|with|try)\b|^@"
                         r"|^[A-Za-z_][\w.]*(\s*,\s*[A-Za-z_][\w.]*)*\s*(=[^=]|[-+*/]=)")


@dataclass(frozen=True)
class LoadProblem:
    kind: ProblemKind
    origin: str  # file name relative to the submission
    line: int | None  # 1-based line in the learner's file (notebooks: line within the cell)
    cell: int | None  # notebooks: 1-based code-cell number, else None
    detail: str  # short technical detail, never a traceback


@dataclass(frozen=True)
class Submission:
    learner: str  # its id (grader/intake/names.py): the file or folder name without extension, made safe
    path: Path
    # Plain dicts rather than read-only proxies: a Submission must pickle to reach workers.
    sources: Mapping[str, Source]  # exercise id -> file holding its functions
    problems: Mapping[str, LoadProblem]  # exercise id -> why its file can't be used
    # An exercise id in neither mapping is simply absent (not attempted).
    submitted_as: str = ""  # the file or folder's name as the learner gave it, shown (grader/intake/names.py)
    # A folder's .py and .ipynb files that serve no exercise, shown: what an absent exercise's message lists.
    others: tuple[str, ...] = ()
    # Those of its other .py files that an exercise can import by name (``helpers_of``).
    helpers: tuple[Source, ...] = ()


def load_submission(path: Path, exercise_modules: Mapping[str, str], *,
                    max_bytes: int = DEFAULT_MAX_BYTES) -> Submission:
    """Read the submission at `path` for the exercises `exercise_modules` (id -> module).

    What a learner uploads is hostile input, read before any sandbox exists: no symbolic link is
    followed, the submission's own included (a folder whose files link to the course's solutions
    once scored 80 instead of 16); a file larger than ``max_bytes`` is not read at all (a 300 MB
    notebook took this process to 1.5 GiB); each is a `LoadProblem`, charged to the exercises it
    serves.

    Raises GraderError only when `path` does not exist (a usage error, not the learner's);
    an OSError reading an existing file (permissions) is the grader's environment's problem.
    """
    if not os.path.lexists(path):
        raise GraderError(f"Submission not found: {path}")
    name = path.name or path.resolve().name  # Path(".") has an empty name
    learner = learner_id(name, is_dir=path.is_dir() and not path.is_symlink())
    if path.is_symlink():
        problem = LoadProblem("link", shown(name), None, None, "the grader follows no link out of a submission")
        return Submission(learner, path, {}, dict.fromkeys(exercise_modules, problem), submitted_as(name))
    if path.is_dir():
        return _load_folder(path, learner, exercise_modules, max_bytes)
    return _load_single(path, learner, exercise_modules, max_bytes)


def _load_single(file: Path, learner: str, exercise_modules: Mapping[str, str], max_bytes: int) -> Submission:
    """One file serves every exercise, so its one outcome is shared by all of them."""
    origin = shown(file.name)
    if file.suffix.lower() in SUFFIXES:
        loaded = _load_file(file, origin, SINGLE_MODULE, max_bytes)
    else:
        suffix = shown(file.suffix) or "(none)"
        detail = f"unsupported file type {suffix}; submit a .py file, a .ipynb or a folder"
        loaded = LoadProblem("unsupported", origin, None, None, detail)
    if isinstance(loaded, Source):
        return Submission(learner, file, dict.fromkeys(exercise_modules, loaded), {}, submitted_as(file.name))
    return Submission(learner, file, {}, dict.fromkeys(exercise_modules, loaded), submitted_as(file.name))


def _load_folder(folder: Path, learner: str, exercise_modules: Mapping[str, str], max_bytes: int) -> Submission:
    name = submitted_as(folder.name or folder.resolve().name)
    sources: dict[str, Source] = {}
    problems: dict[str, LoadProblem] = {}
    candidates = [
        Path(entry.path)
        for entry in folder_entries(folder)
        if not entry.name.startswith(".")
        and entry.name not in IGNORED_NAMES
        and os.path.splitext(entry.name)[1].lower() in SUFFIXES
        and not entry.is_dir(follow_symlinks=False)
    ]
    plain = {path: _plain_name(path.stem) for path in candidates}
    used: set[str] = set()
    for exercise, module in exercise_modules.items():
        file = _exercise_file(folder, module) or _renamed_file(plain, module)
        if file is None:
            continue
        used.add(file.name)
        loaded = _load_file(file, file.name, module, max_bytes)
        if isinstance(loaded, Source):
            sources[exercise] = loaded
        else:
            problems[exercise] = loaded
    # Not named: the files that serve an exercise, and another of an exercise that has one (a .py's notebook
    # twin); named: two renamed candidates for an exercise that got neither.
    served = {exercise_modules[exercise] for exercise in (*sources, *problems)}
    others = tuple(shown(path.name) for path in candidates if path.name not in used and plain[path] not in served)
    if sources or problems:
        helpers = helpers_of([path for path in candidates if path.name not in used], exercise_modules, max_bytes)
        return Submission(learner, folder, sources, problems, name, others, helpers)
    # Two candidates (say a notebook and its .py export) would be a guess: grade neither.
    if len(candidates) == 1:
        single = _load_single(candidates[0], learner, exercise_modules, max_bytes)
        return Submission(learner, folder, single.sources, single.problems, name)
    return Submission(learner, folder, {}, {}, name, others)


def helpers_of(files: list[Path], exercise_modules: Mapping[str, str], max_bytes: int) -> tuple[Source, ...]:
    """A folder's other ``.py`` files that an exercise file can import, as in the learner's own folder
    (``from common import sync`` beside ``common.py``): those whose name is a module name, not an exercise's,
    read as an exercise's file is (no link), ``MAX_HELPERS`` at most and ``max_bytes`` in all (what one file may
    hold: they travel to the learner process in its first message). Graded without them, an exercise that
    imported one lost every check that called it (it "imports `common`, which the grading machine does not
    have")."""
    taken = {*exercise_modules.values(), SINGLE_MODULE}
    helpers: list[Source] = []
    left = max_bytes
    for path in files:
        module = path.stem
        if path.suffix != ".py" or not module.isidentifier() or keyword.iskeyword(module) or module in taken:
            continue
        loaded = _load_file(path, path.name, module, left)  # one larger than what is left is not read
        if isinstance(loaded, Source):
            helpers.append(loaded)
            left -= len(loaded.text.encode("utf-8", "surrogatepass"))
        if len(helpers) == MAX_HELPERS or left <= 0:
            break
    return tuple(helpers)


def folder_entries(folder: Path) -> list[os.DirEntry[str]]:
    """A folder's entries, sorted by name: the first ``MAX_FOLDER_ENTRIES`` the system lists."""
    entries = []
    with os.scandir(folder) as listing:
        for entry in listing:
            entries.append(entry)
            if len(entries) >= MAX_FOLDER_ENTRIES:
                break
    return sorted(entries, key=lambda entry: entry.name)


def _exercise_file(folder: Path, module: str) -> Path | None:
    # The contract names `.py` files, so a `.py` wins over a notebook of the same name. A link is
    # found here (and refused when read), never followed; a folder of that name is not a file.
    for suffix in SUFFIXES:
        file = folder / f"{module}{suffix}"
        try:
            mode = file.lstat().st_mode
        except OSError:
            continue
        if not stat.S_ISDIR(mode):
            return file
    return None


# What a file's name becomes on its way to a submission: a copy's marks — Colab's "Copy of ..." (in
# Vietnamese "Bản sao của ..."), Jupyter's "...-Copy1", Windows' "... - Copy", a browser's second download
# "... (1)", Canvas's resubmitted file "...-1" (it numbers a file whose name the learner's Canvas files
# already hold: instructure/canvas-lms#2310) — and an editor's capitals, dashes or spaces ("Ex1_Device.py").
_COPY_PREFIX = re.compile(r"^(copy of|bản sao của)\s+")
_COPY_SUFFIX = re.compile(r"(\s*\(\d{1,3}\)|-copy\d{0,3}|\s+-\s+copy|-\d{1,3})$")


def _plain_name(stem: str) -> str:
    name = unicodedata.normalize("NFC", stem).casefold().strip()
    while (shorter := _COPY_SUFFIX.sub("", _COPY_PREFIX.sub("", name))) != name:
        name = shorter
    return name.replace("-", "_").replace(" ", "_")


def _renamed_file(plain: Mapping[Path, str], module: str) -> Path | None:
    """The exercise's file under a name the way to the grader changed (``plain``: each of the folder's
    files and its ``_plain_name``), where exactly one file has it (a `.py` before a notebook, as for the
    name itself); two would be a guess, and none is taken."""
    for suffix in SUFFIXES:
        found = [path for path, name in plain.items() if name == module and path.suffix.lower() == suffix]
        if len(found) == 1:
            return found[0]
        if found:
            return None
    return None


def _read(file: Path, origin: str, max_bytes: int) -> bytes | LoadProblem:
    """The file's bytes, or why they are not read: a link (never followed), not a regular file (a
    FIFO would block), or larger than ``max_bytes`` (known from its size before reading any of it)."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return LoadProblem("link", origin, None, None, "the grader follows no link out of a submission")
        raise
    with os.fdopen(fd, "rb") as data:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return LoadProblem("unsupported", origin, None, None, "not a regular file")
        size = status.st_size
        raw = data.read(max_bytes + 1) if size <= max_bytes else b""
    if size > max_bytes or len(raw) > max_bytes:
        return LoadProblem("too_large", origin, None, None,
                           f"{_mib(max(size, len(raw)))} MiB, larger than the {_mib(max_bytes)} MiB a file may be")
    return raw


def _mib(count: int) -> str:
    return f"{count / MiB:.0f}" if count >= MiB else f"{count / MiB:.2f}"


@dataclass(frozen=True)
class _RawCell:
    label: str
    lines: list[str]
    magics: bool  # a `%%magic` first line is a cell magic (notebook and exported cells)


def _load_file(file: Path, origin: str, module: str, max_bytes: int) -> Source | LoadProblem:
    is_notebook = file.suffix.lower() == ".ipynb"
    raw = _read(file, origin, max_bytes)
    if isinstance(raw, LoadProblem):
        return raw
    decoded = _decode(raw, origin, is_notebook=is_notebook)
    del raw  # a notebook's bytes, no longer needed while its JSON is read
    if isinstance(decoded, LoadProblem):
        return decoded
    if is_notebook:
        found = _notebook_code_cells(decoded, origin)
        if isinstance(found, LoadProblem):
            return found
        code_cells = found
    else:
        code_cells = _exported_cells(decoded.split("\n"))
    if not code_cells or all(_is_blank_or_comment(line) for cell in code_cells for line in cell.lines):
        what = "no code" if is_notebook else "only blank lines and comments"
        return LoadProblem("empty", origin, None, None, f"the file holds {what}")

    rewritten = [neutralise(cell.lines, cell_magics=cell.magics) for cell in code_cells]
    lines = [line for cell in rewritten for line in cell]
    lines[:2] = [_drop_foreign_coding(line) for line in lines[:2]]
    if code_cells[0].label:  # notebook or exported cells
        cells, first = [], 1
        for cell in code_cells:
            if any(not _is_blank_or_comment(line) for line in cell.lines):
                cells.append(Cell(cell.label, first, first + len(cell.lines) - 1))
            first += len(cell.lines)
        text = "\n".join(lines) + ("\n" if is_notebook else "")
        return Source(module, text, origin, tuple(cells), numbered=True)
    text = "\n".join(lines)
    return Source(module, text, origin, _statements(lines), numbered=False)


def _exported_cells(lines: list[str]) -> list[_RawCell]:
    """The cells of a .py exported from a notebook, or one unlabelled cell for any other file."""
    markers = [(i, m) for i, line in enumerate(lines) if (m := _IN_MARKER.match(line) or _PERCENT_MARKER.match(line))]
    if not markers:
        return [_RawCell("", lines, magics=False)]
    cells = [_RawCell("before the first cell", lines[: markers[0][0]], magics=False)]
    code_cells = 0
    for n, (i, match) in enumerate(markers):
        end = markers[n + 1][0] if n + 1 < len(markers) else len(lines)
        body = lines[i:end]  # the marker line stays: it is a comment
        rest = match.groupdict().get("rest")
        if rest is not None and re.match(r"\s*\[(markdown|md|raw)\]", rest):
            cells.append(_RawCell("markdown", [as_comment(line) for line in body], magics=False))
            continue
        code_cells += 1
        count = match.groupdict().get("count")
        cells.append(_RawCell(f"In [{count}]" if count else f"cell {code_cells}", body, magics=True))
    return cells


def _statements(lines: list[str]) -> tuple[Cell, ...]:
    """The top-level statements of a plain .py, as cells labelled by their first line."""
    text = "\n".join(lines)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning ("\\d") is the learner's business
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _chunks(lines)
    cells = []
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        cells.append(Cell(f"line {first}", first, node.end_lineno or node.lineno))
    return tuple(cells)


def _chunks(lines: list[str]) -> tuple[Cell, ...]:
    """Statements found without a parser: each starts at column 0, outside strings and brackets.

    For a file that does not parse as a whole: each piece then compiles, or fails, alone.
    """
    starts: list[int] = []
    state = LexState()
    after_decorator = False
    for i, line in enumerate(lines):
        if state.quote is None and _DEFINITION.match(line):
            state = LexState()  # a bracket left open above is the broken statement's, not this one's
        if state.at_statement_start and line[:1] not in ("", " ", "\t", "#") and not _CONTINUATION.match(line):
            if not after_decorator:
                starts.append(i)
            after_decorator = line.startswith("@")
        state = scan(line, state)
    cells = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        while end > start + 1 and _is_blank_or_comment(lines[end - 1]):
            end -= 1
        cells.append(Cell(f"line {start + 1}", start + 1, end))
    return tuple(cells)


def _decode(raw: bytes, origin: str, *, is_notebook: bool) -> str | LoadProblem:
    bom = codecs.BOM_UTF8 if raw.startswith(codecs.BOM_UTF8) else b""
    try:
        text = raw[len(bom) :].decode("utf-8")
    except UnicodeDecodeError as error:
        declared = None if is_notebook else _declared_text(raw)  # a notebook is JSON: UTF-8 only
        if declared is not None:
            return declared.replace("\r\n", "\n").replace("\r", "\n")
        offset = error.start + len(bom)
        line = _line_of_offset(raw, offset)
        detail = f"byte {offset} (0x{raw[offset]:02x}, line {line}) is not valid UTF-8"
        # A notebook's line is a line of its JSON, not of a cell: keep it in the detail only.
        return LoadProblem("undecodable", origin, None if is_notebook else line, None, detail)
    # compile() would accept CRLF, but a lone CR is a line break only to some tools.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _declared_text(raw: bytes) -> str | None:
    """A file that is not UTF-8, decoded as its coding declaration says (PEP 263: ``# -*- coding:
    cp1258 -*-`` in its first two lines), as Python itself reads it; None without one, or where the
    bytes are not of the encoding it names (Python refuses those files too)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        if codecs.lookup(encoding).name == "utf-8":
            return None
        return raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None


def _line_of_offset(raw: bytes, offset: int) -> int:
    before = raw[:offset]
    return before.count(b"\n") + before.replace(b"\r\n", b"\n").count(b"\r") + 1


def _notebook_code_cells(text: str, origin: str) -> list[_RawCell] | LoadProblem:
    """Each code cell, in order, with the label the learner sees; markdown and raw cells are skipped."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        detail = _short(f"not notebook JSON: {error.msg} ({where})")
        return LoadProblem("bad_notebook", origin, None, None, detail)
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return LoadProblem("bad_notebook", origin, None, None, "not a notebook: no 'cells' list")

    # Hand-written and exported notebooks often lack keys that only Jupyter itself needs;
    # fill them so nbformat reads the cells instead of refusing the whole file.
    data.setdefault("metadata", {})
    data.setdefault("nbformat", 4)
    data.setdefault("nbformat_minor", 0)
    for cell in data["cells"]:
        if isinstance(cell, dict):
            cell.setdefault("metadata", {})
            # What cells printed and drew (images: most of a notebook's bytes) is never graded:
            # dropped before nbformat copies the notebook twice more.
            if "outputs" in cell:
                cell["outputs"] = []
            cell.pop("attachments", None)
    # Imported here: grading .py files needs no nbformat (the GPU validation machine has none).
    import nbformat
    import nbformat.reader

    try:
        # nbformat.reads() would also validate and log every schema slip of a Colab
        # notebook; reading and converting is all this stage needs. Its warnings (missing
        # or duplicate cell ids) say nothing about the learner's code.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            notebook = nbformat.convert(nbformat.reader.reads(json.dumps(data)), 4)
    # nbformat raises many types (ValidationError, NBFormatError, KeyError, TypeError) on
    # odd JSON; each one means the learner's notebook cannot be read, which is a result.
    except Exception as error:  # noqa: BLE001
        return LoadProblem("bad_notebook", origin, None, None, _short(f"not a notebook: {error}"))

    cells: list[_RawCell] = []
    for index, cell in enumerate(notebook.get("cells", []), 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        count = cell.get("execution_count")
        label = f"In [{count}]" if isinstance(count, int) and not isinstance(count, bool) else f"cell {len(cells) + 1}"
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            detail = f"cell {index} has a 'source' that is not text"
            return LoadProblem("bad_notebook", origin, None, None, detail)
        source = source.replace("\r\n", "\n").replace("\r", "\n")
        lines = source.split("\n") if source else []
        if source.endswith("\n"):
            lines.pop()  # the newline ends the last line; it does not start another
        cells.append(_RawCell(label, lines, magics=True))
    return cells


def _is_blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _drop_foreign_coding(line: str) -> str:
    """Disarm a coding declaration that is not UTF-8.

    The text was decoded as UTF-8 and is written back as UTF-8; an import that honoured
    `# coding: latin-1` would garble every Vietnamese string (or fail on an unknown name).
    """
    match = _CODING_COOKIE.match(line)
    if match is None:
        return line
    try:
        if codecs.lookup(match[1]).name == "utf-8":
            return line
    except LookupError:
        pass
    return re.sub(r"coding[:=]", "coding ", line)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"
