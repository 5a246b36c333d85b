"""Load a submission: turn a learner's path into Python sources ready to import.

A submission is a `.py` file, a `.ipynb` notebook, or a folder of per-exercise files.
This stage only reads, rewrites and compiles text: the grader's own process never runs a
line of learner code, so every learner mistake found here (bad bytes, broken notebook JSON,
a syntax error) becomes a `LoadProblem` for the exercises it spoils, never an exception.

Notebook code is made plain Python by neutralising IPython syntax (magics, shell escapes,
`obj?` help) line by line, always keeping the line count, so that a line number reported by
`compile` or by a later traceback still points at the learner's own line (and cell).

A top-level `if __name__ == "__main__":` block needs no treatment here: the sandbox imports
each source under its module name (`submission`, `ex1_device`, ...), so the block never runs.
"""

from __future__ import annotations

import codecs
import json
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from grader.errors import GraderError

ProblemKind = Literal["syntax_error", "empty", "undecodable", "bad_notebook", "unsupported"]

SINGLE_MODULE = "submission"

# Cell magics whose body is ordinary Python that runs in the user namespace; every other
# cell magic (%%bash, %%writefile, %%html, ...) makes its whole cell foreign text.
_PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "capture"})

# Tools leave these next to the learner's work; they are never the submission itself.
IGNORED_NAMES = frozenset({"__pycache__", ".ipynb_checkpoints"})

_MAX_DETAIL = 200

# `files = !ls`, `t = %timeit -o f()`: IPython assigns the magic's result to the names.
_MAGIC_ASSIGNMENT = re.compile(
    r"^(?P<indent>\s*)(?P<targets>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[!%]"
)
# PEP 263: a coding declaration counts only on the first two lines.
_CODING_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass(frozen=True)
class SourceFile:
    module: str  # importable module name, e.g. "ex1_device" or "submission"
    text: str  # Python source to write as f"{module}.py" in the sandbox's work dir
    origin: str  # file name relative to the submission, as the learner knows it
    # notebooks only: for each line of `text` (index line-1), the 1-based code-cell number
    cell_of_line: tuple[int, ...] = ()


@dataclass(frozen=True)
class LoadProblem:
    kind: ProblemKind
    origin: str  # file name relative to the submission
    line: int | None  # 1-based line in the learner's file (notebooks: line within the cell)
    cell: int | None  # notebooks: 1-based code-cell number, else None
    detail: str  # short technical detail, never a traceback


@dataclass(frozen=True)
class Submission:
    learner: str  # file or folder name without extension
    path: Path
    # Plain dicts rather than read-only proxies: a Submission must pickle to reach workers.
    sources: Mapping[str, SourceFile]  # exercise id -> file holding its functions
    problems: Mapping[str, LoadProblem]  # exercise id -> why its file can't be used
    # An exercise id in neither mapping is simply absent (not attempted).


def load_submission(path: Path, exercise_modules: Mapping[str, str]) -> Submission:
    """Read the submission at `path` for the exercises `exercise_modules` (id -> module).

    Raises GraderError only when `path` does not exist (a usage error, not the learner's);
    an OSError reading an existing file (permissions) is the grader's environment's problem.
    """
    if not path.exists():
        raise GraderError(f"Submission not found: {path}")
    if path.is_dir():
        return _load_folder(path, exercise_modules)
    return _load_single(path, path.stem, path.name, exercise_modules)


def _load_single(
    file: Path, learner: str, origin: str, exercise_modules: Mapping[str, str]
) -> Submission:
    """One file serves every exercise, so its one outcome is shared by all of them."""
    if file.suffix.lower() in (".py", ".ipynb"):
        loaded = _load_file(file, origin, SINGLE_MODULE)
    else:
        suffix = file.suffix or "(none)"
        detail = f"unsupported file type {suffix}; submit a .py file, a .ipynb or a folder"
        loaded = LoadProblem("unsupported", origin, None, None, detail)
    if isinstance(loaded, SourceFile):
        return Submission(learner, file, dict.fromkeys(exercise_modules, loaded), {})
    return Submission(learner, file, {}, dict.fromkeys(exercise_modules, loaded))


def _load_folder(folder: Path, exercise_modules: Mapping[str, str]) -> Submission:
    learner = folder.name or folder.resolve().name  # Path(".") has an empty name
    sources: dict[str, SourceFile] = {}
    problems: dict[str, LoadProblem] = {}
    for exercise, module in exercise_modules.items():
        file = _exercise_file(folder, module)
        if file is None:
            continue
        loaded = _load_file(file, file.name, module)
        if isinstance(loaded, SourceFile):
            sources[exercise] = loaded
        else:
            problems[exercise] = loaded
    if sources or problems:
        return Submission(learner, folder, sources, problems)

    candidates = [
        entry
        for entry in sorted(folder.iterdir())
        if not entry.name.startswith(".")
        and entry.name not in IGNORED_NAMES
        and entry.suffix.lower() in (".py", ".ipynb")
        and entry.is_file()
    ]
    # Two candidates (say a notebook and its .py export) would be a guess: grade neither.
    if len(candidates) == 1:
        single = _load_single(candidates[0], learner, candidates[0].name, exercise_modules)
        return Submission(learner, folder, single.sources, single.problems)
    return Submission(learner, folder, {}, {})


def _exercise_file(folder: Path, module: str) -> Path | None:
    # The contract names `.py` files, so a `.py` wins over a notebook of the same name.
    for suffix in (".py", ".ipynb"):
        file = folder / f"{module}{suffix}"
        if file.is_file():
            return file
    return None


def _load_file(file: Path, origin: str, module: str) -> SourceFile | LoadProblem:
    is_notebook = file.suffix.lower() == ".ipynb"
    decoded = _decode(file.read_bytes(), origin, is_notebook=is_notebook)
    if isinstance(decoded, LoadProblem):
        return decoded
    if is_notebook:
        cells = _notebook_code_cells(decoded, origin)
        if isinstance(cells, LoadProblem):
            return cells
    else:
        cells = [decoded.split("\n")]

    original = [line for cell in cells for line in cell]
    if all(_is_blank_or_comment(line) for line in original):
        what = "no code" if is_notebook else "only blank lines and comments"
        return LoadProblem("empty", origin, None, None, f"the file holds {what}")

    # A .py exported from Colab keeps `!pip install ...` lines, so plain files get the same
    # line rewriting; only notebooks have cells, hence cell magics.
    rewritten = [line for cell in cells for line in _neutralise(cell, cell_magics=is_notebook)]
    rewritten[:2] = [_drop_foreign_coding(line) for line in rewritten[:2]]
    if is_notebook:
        text = "\n".join(rewritten) + "\n"
        cell_of_line = tuple(number for number, cell in enumerate(cells, 1) for _ in cell)
    else:
        text = "\n".join(rewritten)
        cell_of_line = ()

    problem = _syntax_problem(text, origin, original, cell_of_line)
    if problem is not None:
        return problem
    return SourceFile(module, text, origin, cell_of_line)


def _decode(raw: bytes, origin: str, *, is_notebook: bool) -> str | LoadProblem:
    bom = codecs.BOM_UTF8 if raw.startswith(codecs.BOM_UTF8) else b""
    try:
        text = raw[len(bom) :].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = error.start + len(bom)
        line = _line_of_offset(raw, offset)
        detail = f"byte {offset} (0x{raw[offset]:02x}, line {line}) is not valid UTF-8"
        # A notebook's line is a line of its JSON, not of a cell: keep it in the detail only.
        return LoadProblem("undecodable", origin, None if is_notebook else line, None, detail)
    # compile() would accept CRLF, but a lone CR is a line break only to some tools.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _line_of_offset(raw: bytes, offset: int) -> int:
    before = raw[:offset]
    return before.count(b"\n") + before.replace(b"\r\n", b"\n").count(b"\r") + 1


def _notebook_code_cells(text: str, origin: str) -> list[list[str]] | LoadProblem:
    """The lines of each code cell, in order; markdown and raw cells are skipped."""
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

    cells: list[list[str]] = []
    for index, cell in enumerate(notebook.get("cells", []), 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
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
        cells.append(lines)
    return cells


def _is_blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _neutralise(lines: list[str], *, cell_magics: bool) -> list[str]:
    """Rewrite IPython-only lines of one cell as plain Python, one line for one line."""
    out = list(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    start = 0
    if cell_magics and first is not None and lines[first].lstrip().startswith("%%"):
        out[first] = _as_pass(lines[first])
        name = lines[first].lstrip()[2:].split(maxsplit=1)
        if not name or name[0] not in _PYTHON_BODY_CELL_MAGICS:
            return [out[i] if i <= first else _as_comment(line) for i, line in enumerate(lines)]
        start = first + 1

    state = _LexState()
    continues_magic = False
    for i in range(start, len(lines)):
        line = lines[i]
        if continues_magic:
            # A comment keeps the tokenizer's indentation bookkeeping out of it.
            out[i] = _as_comment(line)
            continues_magic = line.endswith("\\")
            continue
        if not state.at_statement_start:
            state = _scan(line, state)
            continue
        rewritten = _rewrite_statement_start(line)
        if rewritten is not None:
            out[i] = rewritten
            continues_magic = line.endswith("\\")  # IPython joins `\`-continued magics
            continue
        after = _scan(line, state)
        if after.at_statement_start and _is_help_request(line[: after.code_end]):
            out[i] = _as_pass(line)
        state = after
    return out


def _rewrite_statement_start(line: str) -> str | None:
    stripped = line.lstrip()
    if stripped.startswith(("%", "!")):
        return _as_pass(line)
    match = _MAGIC_ASSIGNMENT.match(line)
    if match is not None:
        return f"{match['indent']}{match['targets']} = None  # {stripped}"
    return None


def _is_help_request(code: str) -> bool:
    # `obj?`, `obj??`, `?obj`: never valid Python outside strings and comments.
    code = code.strip()
    return code.startswith("?") or code.endswith("?")


def _as_pass(line: str) -> str:
    stripped = line.lstrip()
    # Keep the indentation so that a neutralised line inside an `if` still forms its body.
    return f"{line[: len(line) - len(stripped)]}pass  # {stripped}"


def _as_comment(line: str) -> str:
    return f"# {line}" if line.strip() else line


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


@dataclass(frozen=True)
class _LexState:
    """Where a line starts: inside a string, inside brackets, or after a `\\` line end."""

    quote: str | None = None  # the open string's delimiter
    depth: int = 0  # open brackets
    continued: bool = False  # previous line ended with a backslash
    code_end: int = 0  # in the line just scanned: where its comment starts, or its length

    @property
    def at_statement_start(self) -> bool:
        return self.quote is None and self.depth == 0 and not self.continued


def _scan(line: str, state: _LexState) -> _LexState:
    """Just enough of Python's tokenizer to know whether the next line starts a statement.

    IPython only rewrites a magic, shell escape or help request at the start of a
    statement; a `%` or `?` inside a docstring or a bracketed expression stays as written.
    """
    quote, depth = state.quote, state.depth
    code_end = len(line)
    i = 0
    while i < len(line):
        char = line[i]
        if quote is not None:
            if char == "\\":
                i += 2  # an escaped character, the quote included, never ends the string
            elif line.startswith(quote, i):
                i += len(quote)
                quote = None
            else:
                i += 1
            continue
        if char == "#":
            code_end = i
            break
        if char in "'\"":
            quote = char * 3 if line.startswith(char * 3, i) else char
            i += len(quote)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        i += 1
    ends_with_backslash = code_end == len(line) and line.endswith("\\")
    if quote is not None and len(quote) == 1 and not ends_with_backslash:
        quote = None  # an unterminated one-line string; compile() will say so
    continued = quote is None and ends_with_backslash
    return _LexState(quote, depth, continued, code_end)


def _syntax_problem(
    text: str, origin: str, original: list[str], cell_of_line: tuple[int, ...]
) -> LoadProblem | None:
    try:
        # Learner code must not inherit this module's `from __future__` flags, and a
        # SyntaxWarning (`"\d"`, `x is 1`) must not turn into an error under -W error.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, origin, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:  # ValueError: null bytes on Python 3.10
        lineno = getattr(error, "lineno", None)
        message = getattr(error, "msg", None) or str(error)
    except (RecursionError, MemoryError):
        lineno, message = None, "the code is nested too deeply to compile"
    else:
        return None

    if lineno is None and "\x00" in text:  # compile() names no line for a null byte
        lineno = text.count("\n", 0, text.index("\x00")) + 1
    if lineno is not None:
        # An error at the end of input points one line past it; 0 means "no line".
        lineno = min(lineno, len(original)) if lineno >= 1 else None
    detail = message
    if lineno is not None and original[lineno - 1].strip():
        detail = f"{message}: {original[lineno - 1].strip()}"
    if lineno is None or not cell_of_line:
        return LoadProblem("syntax_error", origin, lineno, None, _short(detail))
    cell = cell_of_line[lineno - 1]
    line_in_cell = lineno - cell_of_line.index(cell)
    return LoadProblem("syntax_error", origin, line_in_cell, cell, _short(detail))


def _short(text: str) -> str:
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"
