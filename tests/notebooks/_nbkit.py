"""Building blocks for make_catalog.py: cells, saved outputs, tracebacks, the writers.

Each notebook of the catalog is a list of cells written once and saved in the shape one tool
gives it: Colab (indent 2, source as a list of lines, `colab`/`outputId` cell metadata,
IPython 7 tracebacks), a Kaggle editor download (one line of JSON, source as one string,
`trusted`/`execution`/`_cell_guid` metadata, nbformat 4.4), a Kaggle "Save Version" output
(papermill metadata, nbformat 4.5 with cell ids) and a local Jupyter / VS Code save (what
nbformat itself writes). Only the standard library is used here; make_catalog.py validates
the results with nbformat.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import keyword
import random
import struct
import tokenize
import zlib
from dataclasses import dataclass, field

# --- saved outputs ------------------------------------------------------------------------


def stdout(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def stderr(text: str) -> dict:
    return {"output_type": "stream", "name": "stderr", "text": text}


def result(text: str) -> dict:
    """An execute_result (`Out[n]`); its execution_count is filled in from the cell."""
    return {"output_type": "execute_result", "data": {"text/plain": text}, "metadata": {}}


def display(text: str, html: str | None = None) -> dict:
    data = {"text/plain": text}
    if html is not None:
        data = {"text/html": html, "text/plain": text}
    return {"output_type": "display_data", "data": data, "metadata": {}}


def figure(plain: str = "<Figure size 640x480 with 1 Axes>", points: tuple[float, ...] = (0.3, 1.1, 9.0, 38.0)) -> dict:
    return {"output_type": "display_data", "data": {"image/png": tiny_plot_png(points), "text/plain": plain},
            "metadata": {}}


@dataclass(frozen=True)
class Err:
    """An error output, rendered as the cell's tool renders it (needs the cell's source)."""

    ename: str
    evalue: str
    line: int = 1  # 1-based line of the cell the error points at
    lib: tuple[tuple[str, int, str, str], ...] = ()  # (file, line, function, code) frames below the cell
    special: str = ""  # "syntax" | "exit"


def err(ename: str, evalue: str, line: int = 1, *lib: tuple[str, int, str, str]) -> Err:
    return Err(ename, evalue, line, tuple(lib))


def syntax_err(evalue: str, line: int, col: int) -> Err:
    return Err("SyntaxError", evalue, line, (("", col, "", ""),), special="syntax")


def exit_err() -> Err:
    return Err("SystemExit", "", special="exit")


# --- cells --------------------------------------------------------------------------------


@dataclass
class Cell:
    kind: str  # "code" | "markdown"
    source: str
    count: int | None = None
    outputs: list = field(default_factory=list)
    stop: str | None = None  # what the grader must do with this cell on a CPU-only machine
    hide: bool = False  # Kaggle: _kg_hide-input
    duration: float = 0.05  # Kaggle: seconds the cell ran


class Notebook:
    def __init__(self, flavour: str, file: str, *, title: str, seed: int, what: str,
                 wrong: tuple[str, ...] = (), start: str = "2025-03-08T09:12:00") -> None:
        self.flavour = flavour  # colab | kaggle | kaggle_version | jupyter | vscode
        self.file = file
        self.title = title
        self.what = what
        self.wrong = wrong
        self.rng = random.Random(seed)
        self.clock = dt.datetime.fromisoformat(start)
        self.cells: list[Cell] = []
        self.extra_metadata: dict = {}

    def md(self, text: str) -> None:
        self.cells.append(Cell("markdown", text.strip("\n")))

    def code(self, src: str, n: int | None = None, *outputs: object, stop: str | None = None,
             hide: bool = False, duration: float = 0.05) -> None:
        self.cells.append(Cell("code", src.strip("\n"), n, list(outputs), stop, hide, duration))

    def code_cells(self) -> list[Cell]:
        return [c for c in self.cells if c.kind == "code"]

    def stopped(self) -> list[tuple[str, str]]:
        """(label, kind) of each cell the grader must stop: `In [n]`, else `cell k`."""
        out = []
        for k, cell in enumerate(self.code_cells(), 1):
            if cell.stop:
                out.append((f"In [{cell.count}]" if cell.count is not None else f"cell {k}", cell.stop))
        return out

    # --- random but stable identifiers ---
    def colab_id(self) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        return "".join(self.rng.choice(alphabet) for _ in range(12))

    def uuid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"

    def hex(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"

    def tick(self, seconds: float) -> str:
        self.clock += dt.timedelta(seconds=seconds)
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


# --- tracebacks ---------------------------------------------------------------------------

_RED, _GREEN, _CYAN, _BLUE, _RESET = "\x1b[0;31m", "\x1b[0;32m", "\x1b[0;36m", "\x1b[0;34m", "\x1b[0m"
_RULE = _RED + "-" * 75 + _RESET


def _tb_head(ename: str) -> str:
    pyver = "Traceback (most recent call last)"
    return f"{_RED}{ename}{_RESET}{' ' * max(1, 75 - len(ename) - len(pyver))}{pyver}"


def _tokens(line: str) -> list[tuple[int, str]]:
    """(token type, text) for one line, whitespace kept as type -1; never fails."""
    out: list[tuple[int, str]] = []
    pos = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line + "\n").readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
                continue
            start = tok.start[1]
            if start > pos:
                out.append((-1, line[pos:start]))
            out.append((tok.type, tok.string))
            pos = tok.end[1] if tok.end[0] == 1 else len(line)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    if pos < len(line):
        out.append((-1, line[pos:]))
    return out


def _ipy7_colour(line: str) -> str:
    """Roughly what IPython 7's PyColorize (Colab) makes of one source line."""
    parts = []
    for kind, text in _tokens(line):
        if kind == -1:
            parts.append(text)
        elif kind == tokenize.NAME and keyword.iskeyword(text):
            parts.append(f"{_GREEN}{text}{_RESET}")
        elif kind == tokenize.NAME:
            parts.append(f"{_RESET}{text}{_RESET}")
        elif kind == tokenize.NUMBER:
            parts.append(f"{_CYAN}{text}{_RESET}")
        elif kind == tokenize.STRING:
            parts.append(f"{_BLUE}{text}{_RESET}")
        elif kind == tokenize.COMMENT:
            parts.append(f"{_RED}{text}{_RESET}")
        else:
            parts.append(f"{_BLUE}{text}{_RESET}")
    return "".join(parts) + f"{_BLUE}{_RESET}{_BLUE}{_RESET}{_RESET}"


def _ipy8_colour(line: str) -> str:
    """Roughly what IPython 8 (Kaggle, JupyterLab) makes of one line: pygments' 256 colours."""
    parts = []
    for kind, text in _tokens(line):
        if kind == -1:
            parts.append(text)
        elif kind == tokenize.NAME and keyword.iskeyword(text):
            parts.append(f"\x1b[38;5;28;01m{text}\x1b[39;00m")
        elif kind == tokenize.NAME and text in ("print", "range", "len", "input", "zip"):
            parts.append(f"\x1b[38;5;28m{text}\x1b[39m")
        elif kind in (tokenize.NUMBER, tokenize.OP):
            parts.append(f"\x1b[38;5;241m{text}\x1b[39m")
        elif kind == tokenize.STRING:
            parts.append(f"\x1b[38;5;124m{text}\x1b[39m")
        elif kind == tokenize.COMMENT:
            parts.append(f"\x1b[38;5;66;03m{text}\x1b[39;00m")
        else:
            parts.append(text)
    return "".join(parts)


def _context(lines: list[str], line: int) -> range:
    return range(max(1, line - 2), min(len(lines), line + 2) + 1)


def render_error(e: Err, source: str, count: int | None, style: str, rng: random.Random) -> dict:
    """The error output as IPython 7 (style "ipy7", Colab) or IPython 8 ("ipy8") saves it."""
    lines = source.split("\n")
    n = count if count is not None else " "
    tag = f"{rng.getrandbits(48):012x}"
    if e.special == "exit":
        tb = ["An exception has occurred, use %tb to see the full traceback.\n", f"{_RED}SystemExit{_RESET}\n"]
        return {"output_type": "error", "ename": "SystemExit", "evalue": "", "traceback": tb}
    if e.special == "syntax":
        col = e.lib[0][1]
        where = f"<ipython-input-{n}-{tag}>" if style == "ipy7" else f"In[{n}]"
        code = lines[e.line - 1]
        if style == "ipy7":
            head = f'{_CYAN}  File {_GREEN}"{where}"{_CYAN}, line {_GREEN}{e.line}{_RESET}\n'
            evalue = f"{e.evalue} ({where}, line {e.line})"
        else:
            head = f"{_CYAN}  Cell {_GREEN}{where}, line {e.line}{_CYAN}{_RESET}\n"
            evalue = f"{e.evalue} ({rng.getrandbits(32)}.py, line {e.line})"
        body = (f"{head}{_RED}    {code.strip()}{_RESET}\n{_RESET}    {' ' * (col - 1)}^{_RESET}\n"
                f"{_RED}SyntaxError{_RESET}{_RED}:{_RESET} {e.evalue}\n")
        return {"output_type": "error", "ename": "SyntaxError", "evalue": evalue, "traceback": [body]}

    frames = []
    ctx = _context(lines, e.line)
    if style == "ipy7":
        body = f"{_GREEN}<ipython-input-{n}-{tag}>{_RESET} in {_CYAN}<cell line: 0>{_BLUE}(){_RESET}\n"
        for i in ctx:
            if i == e.line:
                body += f"{_GREEN}----> {i}{_RED} {_ipy7_colour(lines[i - 1])}\n"
            else:
                body += f"\x1b[1;32m{i:7d}{_RESET} {_ipy7_colour(lines[i - 1])}\n"
        frames.append(body + _RESET)
        for file, lineno, func, code in e.lib:
            frames.append(f"{_GREEN}{file}{_RESET} in {_CYAN}{func}{_BLUE}(){_RESET}\n"
                          f"{_GREEN}----> {lineno}{_RED} {_ipy7_colour(code)}\n{_RESET}")
    else:
        body = f"Cell {_GREEN}In[{n}], line {e.line}{_RESET}\n"
        for i in ctx:
            if i == e.line:
                body += f"{_GREEN}----> {i}{_RESET} {_ipy8_colour(lines[i - 1])}\n"
            elif i < e.line or i == e.line + 1:
                body += f"\x1b[1;32m{i:7d}{_RESET} {_ipy8_colour(lines[i - 1])}\n"
        frames.append(body)
        for file, lineno, func, code in e.lib:
            frames.append(f"File {_GREEN}{file}:{lineno}{_RESET}, in {_CYAN}{func}{_BLUE}(){_RESET}\n"
                          f"{_GREEN}--> {lineno}{_RESET} {_ipy8_colour(code)}\n")
    tb = [_RULE, _tb_head(e.ename), *frames, f"{_RED}{e.ename}{_RESET}: {e.evalue}"]
    return {"output_type": "error", "ename": e.ename, "evalue": e.evalue, "traceback": tb}


# --- a tiny PNG (a speedup line chart) ----------------------------------------------------


def tiny_plot_png(points: tuple[float, ...], w: int = 96, h: int = 64) -> str:
    white, grey, blue = (255, 255, 255), (90, 90, 90), (31, 119, 180)
    px = [[white] * w for _ in range(h)]
    for x in range(8, w - 4):
        px[h - 8][x] = grey
    for y in range(4, h - 7):
        px[y][8] = grey
    top = max(points) or 1.0
    xy = [(10 + i * (w - 18) // max(1, len(points) - 1), h - 10 - int(p / top * (h - 18)))
          for i, p in enumerate(points)]
    for (x0, y0), (x1, y1) in zip(xy, xy[1:], strict=False):
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for s in range(steps + 1):
            x, y = x0 + (x1 - x0) * s // steps, y0 + (y1 - y0) * s // steps
            for dx in (0, 1):
                px[y][min(w - 1, x + dx)] = blue
    for x, y in xy:
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                px[y + dy][x + dx] = blue
    raw = b"".join(b"\x00" + bytes(c for rgb in row for c in rgb) for row in px)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    return base64.b64encode(png).decode("ascii") + "\n"


# --- writers ------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    """nbformat's multiline-string-as-list: each line keeps its newline."""
    return text.splitlines(keepends=True)


def _resolve_outputs(nb: Notebook, cell: Cell, style: str, as_list: bool) -> list[dict]:
    outs = []
    for out in cell.outputs:
        if isinstance(out, Err):
            o = render_error(out, cell.source, cell.count, style, nb.rng)
        else:
            o = json.loads(json.dumps(out))
            if o["output_type"] == "execute_result":
                o = {"output_type": "execute_result", "execution_count": cell.count, "data": o["data"],
                     "metadata": {}}
        if as_list:
            if "text" in o:
                o["text"] = _lines(o["text"])
            for key, value in o.get("data", {}).items():
                if key.startswith("text/"):
                    o["data"][key] = _lines(value)
        outs.append(o)
    return outs


def colab_json(nb: Notebook) -> str:
    cells = []
    for cell in nb.cells:
        cid = nb.colab_id()
        if cell.kind == "markdown":
            cells.append({"cell_type": "markdown", "source": _lines(cell.source), "metadata": {"id": cid}})
            continue
        meta: dict = {"id": cid}
        if cell.outputs:
            colab = {"base_uri": "https://localhost:8080/"}
            if any(isinstance(o, dict) and "image/png" in o.get("data", {}) for o in cell.outputs):
                colab["height"] = 410
            meta = {"colab": colab, "id": cid, "outputId": nb.uuid()}
        cells.append({"cell_type": "code", "source": _lines(cell.source), "metadata": meta,
                      "execution_count": cell.count, "outputs": _resolve_outputs(nb, cell, "ipy7", True)})
    doc = {
        "nbformat": 4,
        "nbformat_minor": 0,
        "metadata": {
            "colab": {"provenance": [], "gpuType": "T4", "name": nb.title},
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
            "language_info": {"name": "python"},
            "accelerator": "GPU",
            **nb.extra_metadata,
        },
        "cells": cells,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


KAGGLE_LANGUAGE_INFO = {
    "name": "python", "version": "3.10.12", "mimetype": "text/x-python",
    "codemirror_mode": {"name": "ipython", "version": 3}, "pygments_lexer": "ipython3",
    "nbconvert_exporter": "python", "file_extension": ".py",
}


def _kaggle_meta(nb: Notebook, docker: int) -> dict:
    return {"accelerator": "nvidiaTeslaT4", "dataSources": [], "dockerImageVersionId": docker,
            "isInternetEnabled": True, "language": "python", "sourceType": "notebook", "isGpuEnabled": True}


def _execution(nb: Notebook, seconds: float) -> dict:
    busy = nb.tick(1.5 + nb.rng.random() * 40)  # the learner reads, types, then runs the cell
    execute_input = nb.tick(0.0003 + nb.rng.random() * 0.0004)
    started = nb.tick(0.00002)
    reply = nb.tick(seconds)
    idle = nb.tick(0.0004)
    return {"iopub.status.busy": busy, "iopub.execute_input": execute_input, "iopub.status.idle": idle,
            "shell.execute_reply.started": started, "shell.execute_reply": reply}


def kaggle_json(nb: Notebook) -> str:
    """A Kaggle editor download: one line of JSON, source as one string, nbformat 4.4."""
    cells = []
    for cell in nb.cells:
        meta: dict = {"_uuid": nb.uuid(), "_cell_guid": nb.uuid(), "trusted": True}
        if cell.kind == "markdown":
            cells.append({"cell_type": "markdown", "source": cell.source, "metadata": meta})
            continue
        meta.update({"collapsed": False, "jupyter": {"outputs_hidden": False}})
        if cell.hide:
            meta["_kg_hide-input"] = True
        if cell.count is not None:
            meta["execution"] = _execution(nb, cell.duration)
        cells.append({"cell_type": "code", "source": cell.source, "metadata": meta,
                      "outputs": _resolve_outputs(nb, cell, "ipy8", False), "execution_count": cell.count})
    doc = {
        "metadata": {"kernelspec": {"language": "python", "display_name": "Python 3", "name": "python3"},
                     "language_info": KAGGLE_LANGUAGE_INFO, "kaggle": _kaggle_meta(nb, 30887)},
        "nbformat_minor": 4,
        "nbformat": 4,
        "cells": cells,
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _nbformat_style(doc: dict) -> str:
    """What nbformat.writes() gives: indent 1, sorted keys, non-ASCII kept."""
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def kaggle_version_json(nb: Notebook) -> str:
    """The notebook of a Kaggle "Save Version" run: papermill ran it top to bottom."""
    cells = []
    run_start = nb.tick(0)
    for cell in nb.cells:
        cid = nb.hex(8)
        pm_start = nb.tick(0.003)
        if cell.kind == "markdown":
            pm = {"duration": round(0.002 + nb.rng.random() * 0.004, 6), "end_time": None, "exception": False,
                  "start_time": pm_start[:-1], "status": "completed"}
            pm["end_time"] = nb.tick(pm["duration"])[:-1]
            cells.append({"cell_type": "markdown", "id": cid, "metadata": {"papermill": pm, "tags": []},
                          "source": _lines(cell.source)})
            continue
        execution = _execution(nb, cell.duration)
        pm_end = nb.tick(0.004)
        pm = {"duration": round(cell.duration + 0.011, 6), "end_time": pm_end[:-1], "exception": False,
              "start_time": pm_start[:-1], "status": "completed"}
        meta: dict = {"execution": {k: execution[k] for k in ("iopub.execute_input", "iopub.status.busy",
                                                                "iopub.status.idle", "shell.execute_reply")},
                      "papermill": pm, "tags": []}
        if cell.hide:
            meta["_kg_hide-input"] = True
        cells.append({"cell_type": "code", "execution_count": cell.count, "id": cid, "metadata": meta,
                      "outputs": _resolve_outputs(nb, cell, "ipy8", True), "source": _lines(cell.source)})
    run_end = nb.tick(1.2)
    doc = {
        "cells": cells,
        "metadata": {
            "kaggle": _kaggle_meta(nb, 30919),
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {k: KAGGLE_LANGUAGE_INFO[k] for k in sorted(KAGGLE_LANGUAGE_INFO)},
            "papermill": {"default_parameters": {}, "duration": 0.0, "end_time": run_end[:-1],
                          "environment_variables": {}, "exception": None, "input_path": "__notebook__.ipynb",
                          "output_path": "__notebook__.ipynb", "parameters": {}, "start_time": run_start[:-1],
                          "version": "2.6.0"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    start = dt.datetime.fromisoformat(run_start[:-1])
    end = dt.datetime.fromisoformat(run_end[:-1])
    doc["metadata"]["papermill"]["duration"] = round((end - start).total_seconds(), 6)
    return _nbformat_style(doc)


def jupyter_json(nb: Notebook, *, vscode: bool = False) -> str:
    """What JupyterLab (or VS Code's notebook editor) saves on a learner's own computer."""
    cells = []
    for cell in nb.cells:
        cid = nb.uuid() if not vscode else nb.hex(8)
        if cell.kind == "markdown":
            cells.append({"cell_type": "markdown", "id": cid, "metadata": {}, "source": _lines(cell.source)})
            continue
        cells.append({"cell_type": "code", "execution_count": cell.count, "id": cid, "metadata": {},
                      "outputs": _resolve_outputs(nb, cell, "ipy8", True), "source": _lines(cell.source)})
    metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)" if not vscode else ".venv (3.11.9)",
                       "language": "python", "name": "python3"},
        "language_info": {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                          "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                          "pygments_lexer": "ipython3", "version": "3.11.9"},
        **nb.extra_metadata,
    }
    return _nbformat_style({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})


def write_notebook(nb: Notebook) -> str:
    if nb.flavour == "colab":
        return colab_json(nb)
    if nb.flavour == "kaggle":
        return kaggle_json(nb)
    if nb.flavour == "kaggle_version":
        return kaggle_version_json(nb)
    return jupyter_json(nb, vscode=nb.flavour == "vscode")


# --- .py exports --------------------------------------------------------------------------


def colab_py(nb: Notebook, drive_id: str) -> str:
    """Colab's File → Download → Download .py."""
    cells = list(nb.cells)
    lead = []
    while cells and cells[0].kind == "markdown":
        lead.append(cells.pop(0).source)
    header = f'# -*- coding: utf-8 -*-\n"""{nb.title}\n\nAutomatically generated by Colab.\n\n' \
             f"Original file is located at\n    https://colab.research.google.com/drive/{drive_id}\n"
    if lead:
        header += "\n" + "\n\n".join(lead) + "\n"
    parts = [header + '"""']
    for cell in cells:
        if cell.kind == "markdown":
            text = cell.source
            parts.append(f'"""{text}"""' if "\n" not in text else f'"""{text}\n"""')
            continue
        lines = cell.source.split("\n")
        first = next((line for line in lines if line.strip()), "")
        if first.lstrip().startswith("%%"):
            body = ["# Commented out IPython magic to ensure Python compatibility."]
            body += [f"# {line}" for line in lines]
            parts.append("\n".join(body))
            continue
        if any(line.lstrip().startswith("%") for line in lines):
            lines = ["# Commented out IPython magic to ensure Python compatibility."] + [
                f"# {line.lstrip()}" if line.lstrip().startswith("%") else line for line in lines]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n\n"


def percent_py(nb: Notebook) -> str:
    """VS Code's "Export as Python Script" (the default, direct export): `# %%` cells, magics kept."""
    parts = []
    for cell in nb.cells:
        if cell.kind == "markdown":
            parts.append("# %% [markdown]\n" + "\n".join(f"# {line}".rstrip() for line in cell.source.split("\n")))
        else:
            parts.append("# %%\n" + cell.source)
    return "\n\n".join(parts) + "\n"
