"""IPython syntax as the Python IPython itself makes of it, line for line.

A Source's text (grader/wire/messages.py) holds a learner's cells with their magics, shell escapes
and ``obj?`` help rewritten into the calls IPython makes of them — ``get_ipython().system(...)``,
``.run_line_magic(...)``, ``.run_cell_magic(...)`` — which the learner process's stand-in kernel
answers (grader/learner/kernel.py). The loader rewrites whole files (grader/intake/submission.py);
the kernel rewrites a cell magic's body when it runs it (``python_of``). Both sides must agree,
so the rules live here, beside the message that carries the text. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Cell magics whose body is ordinary Python that runs in the user namespace, line for line; every
# other cell magic (%%bash, %%writefile, %%capture, ...) hands its body to the kernel as text.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "timeit", "prun"})
# `files = !ls`, `t = %timeit -o f()`: IPython assigns the magic's result to the names.
_MAGIC_ASSIGNMENT = re.compile(
    r"^(?P<indent>\s*)(?P<targets>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*(?P<rest>[!%].*)$"
)


def python_of(cell: str) -> str:
    """One cell's IPython syntax as Python (the body a cell magic such as ``%%capture`` runs)."""
    return "\n".join(neutralise(cell.split("\n"), cell_magics=True))


def neutralise(lines: list[str], *, cell_magics: bool) -> list[str]:
    """Rewrite IPython-only lines of one cell as the Python IPython makes of them, line for line."""
    out = list(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    start = 0
    if cell_magics and first is not None and lines[first].lstrip().startswith("%%"):
        name, _, args = lines[first].lstrip()[2:].partition(" ")
        if name in PYTHON_BODY_CELL_MAGICS:
            out[first] = _as_pass(lines[first])  # the body runs as the cell's own code
            start = first + 1
        else:
            return _cell_magic_call(lines, first, name, args.strip())

    state = LexState()
    i = start
    while i < len(lines):
        line = lines[i]
        if not state.at_statement_start:
            state = scan(line, state)
            i += 1
            continue
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")) or _MAGIC_ASSIGNMENT.match(line):
            # IPython joins `\`-continued magics into one line; the rest become comments.
            joined, n = line, i
            while joined.endswith("\\") and n + 1 < len(lines):
                n += 1
                joined = joined[:-1] + lines[n].strip()
                out[n] = as_comment(lines[n])
            out[i] = _magic_call(joined)
            i = n + 1
            continue
        after = scan(line, state)
        if after.at_statement_start and _is_help_request(line[: after.code_end]):
            indent = line[: len(line) - len(stripped)]
            out[i] = f"{indent}get_ipython().run_line_magic('pinfo', {line[: after.code_end].strip().strip('?')!r})"
        state = after
        i += 1
    return out


def _magic_call(line: str) -> str:
    """One line magic or shell escape (maybe assigned) as IPython's own call."""
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    target = ""
    match = _MAGIC_ASSIGNMENT.match(line)
    if match is not None:
        target, stripped = f"{match['targets']} = ", match["rest"]
    if stripped.startswith("!!"):
        call = f"get_ipython().getoutput({stripped[2:].strip()!r})"
    elif stripped.startswith("!"):
        method = "getoutput" if target else "system"
        call = f"get_ipython().{method}({stripped[1:].strip()!r})"
    else:
        name, _, args = stripped.lstrip("%").partition(" ")
        call = f"get_ipython().run_line_magic({name!r}, {args.strip()!r})"
    return f"{indent}{target}{call}"


def _cell_magic_call(lines: list[str], first: int, name: str, args: str) -> list[str]:
    """``%%bash``, ``%%writefile x.py`` ...: the body goes to the kernel as one string literal,
    spread over the body's own lines (implicit concatenation inside the call's parentheses)."""
    out = list(lines[:first])
    body = lines[first + 1 :]
    call = f"get_ipython().run_cell_magic({name!r}, {args!r}, ''"
    out.append(call + (")" if not body else ""))
    for n, line in enumerate(body):
        out.append(f"    {line + chr(10)!r}" + (")" if n == len(body) - 1 else ""))
    return out


def _is_help_request(code: str) -> bool:
    # `obj?`, `obj??`, `?obj`: never valid Python outside strings and comments.
    code = code.strip()
    return code.startswith("?") or code.endswith("?")


def _as_pass(line: str) -> str:
    stripped = line.lstrip()
    # Keep the indentation so that a neutralised line inside an `if` still forms its body.
    return f"{line[: len(line) - len(stripped)]}pass  # {stripped}"


def as_comment(line: str) -> str:
    return f"# {line}" if line.strip() else line


@dataclass(frozen=True)
class LexState:
    """Where a line starts: inside a string, inside brackets, or after a `\\` line end."""

    quote: str | None = None  # the open string's delimiter
    depth: int = 0  # open brackets
    continued: bool = False  # previous line ended with a backslash
    code_end: int = 0  # in the line just scanned: where its comment starts, or its length

    @property
    def at_statement_start(self) -> bool:
        return self.quote is None and self.depth == 0 and not self.continued


# What ``scan`` stops at: outside a string, a comment, a quote or a bracket; inside one, a backslash or
# the string's quote character. Everything between is skipped in one regex search (a character at a time
# in Python was four fifths of loading a submission: 18 us a line, 2026-12-06).
_CODE_STOPS = re.compile(r"""[#'"()\[\]{}]""")
_STRING_STOPS = {"'": re.compile(r"[\\']"), '"': re.compile(r'[\\"]')}


def scan(line: str, state: LexState) -> LexState:
    """Just enough of Python's tokenizer to know whether the next line starts a statement.

    IPython only rewrites a magic, shell escape or help request at the start of a
    statement; a `%` or `?` inside a docstring or a bracketed expression stays as written.
    """
    quote, depth = state.quote, state.depth
    code_end = len(line)
    i = 0
    while i < len(line):
        if quote is not None:
            stop = _STRING_STOPS[quote[0]].search(line, i)
            if stop is None:
                break
            i = stop.start()
            if line[i] == "\\":
                i += 2  # an escaped character, the quote included, never ends the string
            elif line.startswith(quote, i):
                i += len(quote)
                quote = None
            else:
                i += 1
            continue
        stop = _CODE_STOPS.search(line, i)
        if stop is None:
            break
        i = stop.start()
        char = line[i]
        if char == "#":
            code_end = i
            break
        if char in "'\"":
            quote = char * 3 if line.startswith(char * 3, i) else char
            i += len(quote)
            continue
        if char in "([{":
            depth += 1
        else:
            depth = max(0, depth - 1)
        i += 1
    ends_with_backslash = code_end == len(line) and line.endswith("\\")
    if quote is not None and len(quote) == 1 and not ends_with_backslash:
        quote = None  # an unterminated one-line string; compile() will say so
    continued = quote is None and ends_with_backslash
    return LexState(quote, depth, continued, code_end)
