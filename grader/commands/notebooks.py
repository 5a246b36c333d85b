"""Exercise notebooks for Colab, Kaggle and Jupyter, generated from the stubs with nbformat.

``notebooks/ex1_device.ipynb`` … are never edited by hand: ``grader notebooks`` rewrites them
from ``exercises/*.py`` and the catalogs, and tests/test_notebooks.py fails when the committed
ones are out of date. Each notebook holds: the lesson's instructions (the stub's module
docstring: Vietnamese, then English), a setup cell that pip-installs the grader (tagged
``install``), the stub's code split into cells, and a self-check cell ``grader.check("exN")``
(tagged ``self-check``).

The install cell is ``%pip install -q "<INSTALL_URL>"``. ``%pip`` installs into the kernel's
own environment; without ``-U`` pip keeps every requirement already satisfied, so Colab's and
Kaggle's torch (pyproject asks only for torch>=2.5) stays as it is.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nbformat
from nbformat import v4

from grader.course import LANGS, Course, Exercise
from grader.errors import GraderError
from grader.score import texts

# Where learners pip-install the released bundle (grader release -o DIR, pushed to a public
# repository). Change it here, then run `grader notebooks` and commit the notebooks.
INSTALL_URL = "git+https://github.com/COURSE-ORG/lesson14-gpu-cuda.git"
INSTALL_TAG = "install"
SELF_CHECK_TAG = "self-check"
_ENGLISH_START = re.compile(r"^Exercise \d+\b")
_METADATA: dict[str, Any] = {
    "accelerator": "GPU",  # Colab opens the notebook on a GPU runtime
    "colab": {"gpuType": "T4", "provenance": []},
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def split_docstring(doc: str, where: str) -> tuple[str, str]:
    """The stub's module docstring as (Vietnamese, English); English starts at "Exercise N"."""
    lines = doc.strip().split("\n")
    for i, line in enumerate(lines):
        if _ENGLISH_START.match(line):
            vi, en = "\n".join(lines[:i]).strip(), "\n".join(lines[i:]).strip()
            if vi:
                return vi, en
    raise GraderError(f"{where}: the module docstring needs Vietnamese, then English starting 'Exercise N —'")


def _as_markdown(text: str) -> str:
    first, _, rest = text.partition("\n")
    return f"## {first.strip()}\n{rest.rstrip()}".rstrip()


def stub_cells(source: str, where: str) -> tuple[str, list[str]]:
    """(module docstring, code cells): imports together, then one cell per statement.

    Comments above a statement (ex2's multiple-choice question) stay in its cell.
    """
    tree = ast.parse(source)
    doc = ast.get_docstring(tree, clean=True)
    if doc is None:
        raise GraderError(f"{where}: the stub has no module docstring")
    lines = source.split("\n")
    cells: list[str] = []
    start = tree.body[0].end_lineno or 1
    previous_import = False
    for node in tree.body[1:]:
        end = node.end_lineno or node.lineno
        chunk = "\n".join(lines[start:end]).strip("\n")
        is_import = isinstance(node, (ast.Import, ast.ImportFrom))
        if is_import and previous_import:
            cells[-1] = f"{cells[-1]}\n{chunk}"
        else:
            cells.append(chunk)
        previous_import = is_import
        start = end
    tail = "\n".join(lines[start:]).strip("\n")
    if tail.strip() and cells:
        cells[-1] = f"{cells[-1]}\n{tail}"
    return doc, [cell for cell in cells if cell.strip()]


def _both(key: str, **params: object) -> str:
    heading = " · ".join(texts.ui(lang, f"{key}_heading") for lang in LANGS)
    bodies = "\n\n".join(texts.ui(lang, key).format(**params) for lang in LANGS)
    return f"## {heading}\n\n{bodies}"


def build_notebook(course: Course, exercise: Exercise, *, install_url: str = INSTALL_URL) -> Any:
    if exercise.stub is None:
        raise GraderError(f"{course.path}: {exercise.id} has no stub to build its notebook from")
    where = str(exercise.stub)
    doc, code = stub_cells(exercise.stub.read_text(encoding="utf-8"), where)
    vi, en = split_docstring(doc, where)
    comments = "\n".join(f"# {texts.ui(lang, 'notebook.install_comment')}" for lang in LANGS)
    cells = [
        v4.new_markdown_cell(f"# {course.title['vi']}\n\n*{course.title['en']}*"),
        v4.new_markdown_cell(_as_markdown(vi)),
        v4.new_markdown_cell(_as_markdown(en)),
        v4.new_markdown_cell(_both("notebook.setup")),
        v4.new_code_cell(f'{comments}\n%pip install -q "{install_url}"', metadata={"tags": [INSTALL_TAG]}),
        v4.new_markdown_cell(_both("notebook.code")),
        *(v4.new_code_cell(cell) for cell in code),
        v4.new_markdown_cell(_both("notebook.selfcheck", exercise=exercise.id)),
        v4.new_code_cell(f'import grader\n\ngrader.check("{exercise.id}")', metadata={"tags": [SELF_CHECK_TAG]}),
    ]
    for number, cell in enumerate(cells):
        cell["id"] = f"{exercise.id}-{number:02d}"  # stable ids: regenerating changes nothing
    notebook = v4.new_notebook(cells=cells, metadata=_METADATA)
    nbformat.validate(notebook)
    return notebook


def render_notebooks(course: Course, *, install_url: str = INSTALL_URL) -> dict[str, str]:
    """File name -> notebook text, for every exercise of the course."""
    return {f"{ex.module}.ipynb": nbformat.writes(build_notebook(course, ex, install_url=install_url)) + "\n"
            for ex in course.exercises}


def default_dir(course: Course) -> Path:
    return course.path.parent / "notebooks"


def write_notebooks(course: Course, folder: Path, *, install_url: str = INSTALL_URL) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render_notebooks(course, install_url=install_url).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale_notebooks(rendered: Mapping[str, str], folder: Path) -> list[str]:
    """Names in ``folder`` that differ from ``rendered``, are missing, or are left over."""
    present = {p.name for p in folder.glob("*.ipynb")} if folder.is_dir() else set()
    stale = [name for name, text in rendered.items()
             if name not in present or (folder / name).read_text(encoding="utf-8") != text]
    return sorted(stale + sorted(present - set(rendered)))
