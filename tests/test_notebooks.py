"""The exercise notebooks: generated from the stubs, kept in sync, and runnable in a real kernel."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat import v4

from grader.commands.notebooks import INSTALL_TAG, INSTALL_URL, SELF_CHECK_TAG, render_notebooks
from grader.course import load_course
from tests.conftest import MODULES, ROOT, STUBS, run_cli, solution_text
from tests.test_selfcheck import kernel_warnings, outputs, run_notebook

NOTEBOOKS = ROOT / "notebooks"


def read(name: str) -> Any:
    return nbformat.reads((NOTEBOOKS / name).read_text(encoding="utf-8"), as_version=4)


def test_committed_notebooks_match_the_stubs() -> None:
    """Fails when a stub (or a catalog text) changed: run `grader notebooks` and commit the result."""
    rendered = render_notebooks(load_course())
    assert sorted(rendered) == sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    stale = [name for name, text in rendered.items() if (NOTEBOOKS / name).read_text(encoding="utf-8") != text]
    assert stale == [], "out of date, run `python -m grader notebooks`: " + ", ".join(stale)


@pytest.mark.parametrize(("ex_id", "module"), MODULES.items())
def test_notebook_holds_instructions_stub_code_and_self_check(ex_id: str, module: str) -> None:
    notebook = read(f"{module}.ipynb")
    nbformat.validate(notebook)
    stub = (STUBS / f"{module}.py").read_text(encoding="utf-8")
    stub_tree = ast.parse(stub)
    doc = ast.get_docstring(stub_tree) or ""
    markdown = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    code = [c for c in notebook.cells if c.cell_type == "code"]
    vi_title, en_title = doc.splitlines()[0], next(line for line in doc.splitlines() if line.startswith("Exercise"))
    assert markdown[1].startswith(f"## {vi_title}") and markdown[2].startswith(f"## {en_title}")  # vi, then en

    install = code[0]
    assert install.metadata["tags"] == [INSTALL_TAG]
    pip_line = install.source.splitlines()[-1]
    assert pip_line == f'%pip install -q "{INSTALL_URL}"'
    assert not any(flag in pip_line for flag in ("-U", "--upgrade", "--force-reinstall"))  # keep Colab's torch

    check = code[-1]
    assert check.metadata["tags"] == [SELF_CHECK_TAG]
    assert check.source == f'import grader\n\ngrader.check("{ex_id}")'

    # The code cells between them are the stub, statement for statement.
    body = "\n".join(cell.source for cell in code[1:-1])
    assert ast.dump(ast.parse(body)) == ast.dump(ast.Module(body=stub_tree.body[1:], type_ignores=[]))
    assert all(cell.outputs == [] and cell.execution_count is None for cell in code)


def test_learners_readme_gives_the_notebooks_install_cell() -> None:
    readme = (ROOT / "docs" / "learners.md").read_text(encoding="utf-8")
    assert readme.count(f'%pip install -q "{INSTALL_URL}"') == 2  # Vietnamese and English


def test_cli_writes_and_checks_notebooks(tmp_path: Path) -> None:
    out = tmp_path / "nb"
    proc = run_cli("notebooks", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    for path in NOTEBOOKS.glob("*.ipynb"):
        assert (out / path.name).read_bytes() == path.read_bytes()
    assert run_cli("notebooks", "-o", str(out), "--check").returncode == 0

    edited = json.loads((out / "ex3_roundtrip.ipynb").read_text(encoding="utf-8"))
    edited["cells"][0]["source"] = "# edited by hand"
    (out / "ex3_roundtrip.ipynb").write_text(json.dumps(edited), encoding="utf-8")
    proc = run_cli("notebooks", "-o", str(out), "--check")
    assert proc.returncode == 1
    assert "ex3_roundtrip.ipynb" in proc.stdout and "ex1_device.ipynb" not in proc.stdout


@kernel_warnings
def test_generated_notebook_runs_and_self_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The learner's path in Colab: run the notebook top to bottom after writing the functions."""
    notebook = read("ex3_roundtrip.ipynb")
    cells = [c for c in notebook.cells if INSTALL_TAG not in c.metadata.get("tags", [])]  # no network here
    # The learner's answer, pasted below the stub cells (a later definition wins, as in Colab).
    cells.insert(len(cells) - 2, v4.new_code_cell(solution_text("ex3")))
    executed = run_notebook(cells, tmp_path, monkeypatch)
    text = outputs(executed.cells[-1], "text/plain")
    assert "✓ ex3.roundtrip_values" in text and "✓ ex3.to_numpy_cpu" in text
    assert "Điểm: 13 / 13" in text  # Vietnamese: the course's default language
