"""Loading submissions: every file is written in tmp_path, and no learner code is run."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from grader.errors import GraderError
from grader.submission import LoadProblem, SourceFile, Submission, load_submission
from tests.submissions.catalog import MODULES


def write_notebook(path: Path, cells: list[nbformat.NotebookNode]) -> Path:
    path.write_text(nbformat.writes(v4.new_notebook(cells=cells)), encoding="utf-8")
    return path


def functions_defined(source: SourceFile) -> set[str]:
    # Parsing, not running: these tests obey the same rule as the grader's parent process.
    compile(source.text, source.origin, "exec", dont_inherit=True)
    return {node.name for node in ast.parse(source.text).body if isinstance(node, ast.FunctionDef)}


def only_source(submission: Submission) -> SourceFile:
    assert submission.problems == {}
    assert set(submission.sources) == set(MODULES)
    distinct = {id(source) for source in submission.sources.values()}
    assert len(distinct) == 1, "a single file serves every exercise with one SourceFile"
    return submission.sources["ex1"]


def only_problem(submission: Submission) -> LoadProblem:
    assert submission.sources == {}
    assert set(submission.problems) == set(MODULES)
    assert len(set(submission.problems.values())) == 1
    return submission.problems["ex1"]


def test_plain_py_file_serves_every_exercise(tmp_path: Path) -> None:
    text = (
        "import torch\n\n"
        "def pick_device():\n    return torch.device('cpu')\n\n"
        "SMALL_N_ANSWER = 'B'\n\n"
        "if __name__ == '__main__':\n    print(pick_device())\n"
    )
    path = tmp_path / "nguyen_van_a.py"
    path.write_text(text, encoding="utf-8")

    submission = load_submission(path, MODULES)

    assert submission.learner == "nguyen_van_a"
    assert submission.path == path
    source = only_source(submission)
    assert source == SourceFile("submission", text, "nguyen_van_a.py", ())
    assert functions_defined(source) == {"pick_device"}


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"], ids=["crlf", "lone-cr"])
def test_bom_and_windows_newlines_keep_vietnamese(tmp_path: Path, newline: bytes) -> None:
    lines = [
        "# Bài tập 1: chọn thiết bị",
        "def describe_device(device):",
        '    """Mô tả thiết bị đang dùng."""',
        "    return {'name': 'Bộ xử lý đồ hoạ'}",
        "",
    ]
    path = tmp_path / "trần_thị_b.py"
    path.write_bytes(b"\xef\xbb\xbf" + newline.join(line.encode() for line in lines))

    source = only_source(load_submission(path, MODULES))

    assert source.text == "\n".join(lines)
    assert "\ufeff" not in source.text and "\r" not in source.text
    assert functions_defined(source) == {"describe_device"}


def test_notebook_with_ipython_syntax_compiles_and_maps_cells(tmp_path: Path) -> None:
    cells = [
        v4.new_markdown_cell("# Bài tập về GPU\n%not a magic in markdown"),
        v4.new_code_cell(
            "%matplotlib inline\n!pip install x\nimport torch\nfrom google.colab import drive"
        ),
        v4.new_code_cell(
            "if torch.cuda.is_available():\n    !nvidia-smi\nfiles = !ls\ntorch.cuda?"
        ),
        v4.new_code_cell("%%bash\nnvidia-smi\n  if [ -d x ]; then echo y; fi"),
        v4.new_code_cell(
            "%%time\ndef pick_device():\n    return torch.device('cpu')\n\n"
            "def describe_device(device):\n    return {'type': device.type}\n"
        ),
        v4.new_raw_cell("def not_code(:"),
        v4.new_code_cell("SMALL_N_ANSWER = 'B'"),
    ]
    path = write_notebook(tmp_path / "colab.ipynb", cells)

    source = only_source(load_submission(path, MODULES))

    assert source.module == "submission"
    assert source.origin == "colab.ipynb"
    assert source.text.split("\n") == [
        "pass  # %matplotlib inline",
        "pass  # !pip install x",
        "import torch",
        "from google.colab import drive",
        "if torch.cuda.is_available():",
        "    pass  # !nvidia-smi",
        "files = None  # files = !ls",
        "pass  # torch.cuda?",
        "pass  # %%bash",
        "# nvidia-smi",
        "#   if [ -d x ]; then echo y; fi",
        "pass  # %%time",
        "def pick_device():",
        "    return torch.device('cpu')",
        "",
        "def describe_device(device):",
        "    return {'type': device.type}",
        "SMALL_N_ANSWER = 'B'",
        "",
    ]
    # Code cells are numbered among code cells only: markdown and raw cells don't count.
    assert source.cell_of_line == (1,) * 4 + (2,) * 4 + (3,) * 3 + (4,) * 6 + (5,)
    assert functions_defined(source) == {"pick_device", "describe_device"}


def test_colab_on_disk_notebook_with_source_as_list_of_lines(tmp_path: Path) -> None:
    # What Colab writes: sources split into lines, no cell ids, no outputs or counts, and
    # no kernelspec in the metadata.
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 0,
        "metadata": {"colab": {"provenance": []}, "accelerator": "GPU"},
        "cells": [
            {"cell_type": "markdown", "metadata": {"id": "m1"}, "source": ["# Bài 1\n"]},
            {
                "cell_type": "code",
                "metadata": {"id": "c1"},
                "source": ["import torch\n", "\n", "def pick_device():\n", "    return 1"],
            },
            {"cell_type": "code", "source": ["!nvidia-smi\r\n", "x = 1\r\n"]},
        ],
    }
    path = tmp_path / "bai_1.ipynb"
    path.write_text(json.dumps(notebook, ensure_ascii=False), encoding="utf-8")

    source = only_source(load_submission(path, MODULES))

    assert source.text == (
        "import torch\n\ndef pick_device():\n    return 1\npass  # !nvidia-smi\nx = 1\n"
    )
    assert source.cell_of_line == (1, 1, 1, 1, 2, 2)
    assert functions_defined(source) == {"pick_device"}


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        pytest.param(
            's = """\n%d items\n!important\nwhy?\n"""',
            's = """\n%d items\n!important\nwhy?\n"""',
            id="lines-inside-a-string-stay",
        ),
        pytest.param("y = (10\n  % 3)", "y = (10\n  % 3)", id="modulo-inside-brackets-stays"),
        pytest.param("x = 1  # why?", "x = 1  # why?", id="question-in-comment-stays"),
        pytest.param(
            "!pip install \\\n    torch",
            "pass  # !pip install \\\n#     torch",
            id="continued-shell-line",
        ),
        pytest.param(
            "%%writefile ex1_device.py\ndef pick_device():\n    return 1",
            "pass  # %%writefile ex1_device.py\n# def pick_device():\n#     return 1",
            id="foreign-cell-magic",
        ),
        pytest.param(
            "\n%%capture out\n!pip install x\nimport torch",
            "\npass  # %%capture out\npass  # !pip install x\nimport torch",
            id="capture-body-runs",
        ),
        pytest.param(
            "a, b = %timeit -o f()", "a, b = None  # a, b = %timeit -o f()", id="magic-rhs"
        ),
        pytest.param("a != 3", "a != 3", id="not-equal-stays"),
        pytest.param("get_ipython().system('ls')", "get_ipython().system('ls')", id="get-ipython"),
    ],
)
def test_ipython_syntax_is_rewritten_only_at_statement_start(
    tmp_path: Path, cell: str, expected: str
) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [v4.new_code_cell(cell)])

    source = only_source(load_submission(path, MODULES))

    assert source.text == expected + "\n"
    assert len(source.cell_of_line) == expected.count("\n") + 1


def test_colab_py_export_with_shell_lines_compiles(tmp_path: Path) -> None:
    path = tmp_path / "export.py"
    path.write_text("!pip install -q torch\n%matplotlib inline\ndef f():\n    return 1\n")

    source = only_source(load_submission(path, MODULES))

    assert source.text.startswith("pass  # !pip install -q torch\npass  # %matplotlib inline\n")
    assert source.cell_of_line == ()
    assert functions_defined(source) == {"f"}


def test_foreign_coding_declaration_is_disarmed(tmp_path: Path) -> None:
    # Written back as UTF-8, the file would be imported as latin-1 and garble the Vietnamese.
    path = tmp_path / "cookie.py"
    path.write_text("# -*- coding: latin-1 -*-\ns = 'Việt Nam'\n", encoding="utf-8")

    source = only_source(load_submission(path, MODULES))

    assert source.text.split("\n")[1:] == ["s = 'Việt Nam'", ""]
    assert "coding:" not in source.text and "coding=" not in source.text


@pytest.mark.parametrize(
    "content",
    ['{"cells": [', "not json at all", "[1, 2, 3]", '{"metadata": {}}', '{"cells": [1, 2]}'],
    ids=["truncated", "text", "json-list", "no-cells", "cells-not-objects"],
)
def test_broken_notebook_is_a_bad_notebook_for_every_exercise(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "hỏng.ipynb"
    path.write_text(content, encoding="utf-8")

    submission = load_submission(path, MODULES)

    assert submission.learner == "hỏng"
    problem = only_problem(submission)
    assert problem.kind == "bad_notebook"
    assert problem.origin == "hỏng.ipynb"
    assert problem.cell is None and problem.line is None
    assert problem.detail
    assert "Traceback" not in problem.detail


def test_notebook_syntax_error_names_the_cell_and_its_line(tmp_path: Path) -> None:
    cells = [
        v4.new_code_cell("import torch"),
        v4.new_markdown_cell("Bài 2"),
        v4.new_code_cell("def a():\n    return 1"),
        v4.new_code_cell("x = 1\ndef roundtrip(x, device:\n    return x"),
    ]
    path = write_notebook(tmp_path / "nb.ipynb", cells)

    problem = only_problem(load_submission(path, MODULES))

    assert problem.kind == "syntax_error"
    assert (problem.origin, problem.cell, problem.line) == ("nb.ipynb", 3, 2)
    assert problem.detail.endswith(": def roundtrip(x, device:")


def test_py_syntax_error_names_the_line(tmp_path: Path) -> None:
    lines = ["import torch", "", "", "def pick_device():", "    return 1", "", "def f(:"]
    path = tmp_path / "sub.py"
    path.write_text("\n".join(lines) + "\n    pass\n", encoding="utf-8")

    problem = only_problem(load_submission(path, MODULES))

    assert problem == LoadProblem("syntax_error", "sub.py", 7, None, "invalid syntax: def f(:")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("blank.py", b""),
        ("comments.py", b"# TODO: l\xc3\xa0m b\xc3\xa0i\n\n   \n# -*- coding: utf-8 -*-\n"),
        ("no_cells.ipynb", None),
        ("blank_cells.ipynb", ["", "   \n", "# chưa làm"]),
    ],
)
def test_empty_submission(tmp_path: Path, name: str, content: bytes | list[str] | None) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        cells = [v4.new_markdown_cell("Chỉ có chữ")]
        cells += [v4.new_code_cell(text) for text in content or []]
        write_notebook(path, cells)

    problem = only_problem(load_submission(path, MODULES))

    assert (problem.kind, problem.origin, problem.line, problem.cell) == (
        "empty",
        name,
        None,
        None,
    )


def test_undecodable_bytes_give_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "cp1258.py"
    path.write_bytes(b"x = 1\n# B\xe0i t\xe2p\n")

    problem = only_problem(load_submission(path, MODULES))

    assert (problem.kind, problem.line, problem.cell) == ("undecodable", 2, None)
    assert "byte 9" in problem.detail


def test_null_byte_is_a_syntax_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "nul.py"
    path.write_bytes(b"x = 1\ny = 2\x00\n")

    problem = only_problem(load_submission(path, MODULES))

    assert (problem.kind, problem.line) == ("syntax_error", 2)


def test_folder_of_exercise_files_affects_each_exercise_alone(tmp_path: Path) -> None:
    folder = tmp_path / "le_van_c"
    folder.mkdir()
    (folder / "ex1_device.py").write_text("def pick_device():\n    return 1\n")
    (folder / "ex2_timing.py").write_text("def time_matmul(n, device\n    return 0.0\n")
    write_notebook(
        folder / "ex3_roundtrip.ipynb",
        [
            v4.new_code_cell("!nvidia-smi"),
            v4.new_code_cell("def roundtrip(x, device):\n    return x"),
        ],
    )
    # Tool droppings and stray files are never mistaken for an exercise.
    (folder / ".ipynb_checkpoints").mkdir()
    write_notebook(folder / ".ipynb_checkpoints" / "ex4_oom.ipynb", [v4.new_code_cell("x = 1")])
    (folder / "notes.txt").write_text("ghi chú")

    submission = load_submission(folder, MODULES)

    assert submission.learner == "le_van_c"
    assert set(submission.sources) == {"ex1", "ex3"}
    ex1, ex3 = submission.sources["ex1"], submission.sources["ex3"]
    assert (ex1.module, ex1.origin, ex1.cell_of_line) == ("ex1_device", "ex1_device.py", ())
    assert (ex3.module, ex3.origin, ex3.cell_of_line) == (
        "ex3_roundtrip",
        "ex3_roundtrip.ipynb",
        (1, 2, 2),
    )
    assert functions_defined(ex1) == {"pick_device"}
    assert functions_defined(ex3) == {"roundtrip"}
    assert set(submission.problems) == {"ex2"}
    problem = submission.problems["ex2"]
    assert (problem.kind, problem.origin, problem.line, problem.cell) == (
        "syntax_error",
        "ex2_timing.py",
        1,
        None,
    )


def test_folder_with_one_notebook_of_another_name_is_a_single_file(tmp_path: Path) -> None:
    folder = tmp_path / "pham_d"
    folder.mkdir()
    write_notebook(
        folder / "Bài tập GPU.ipynb", [v4.new_code_cell("def pick_device():\n    return 1")]
    )
    (folder / ".ipynb_checkpoints").mkdir()
    write_notebook(folder / ".ipynb_checkpoints" / "old.ipynb", [v4.new_code_cell("x = 1")])
    (folder / ".hidden.py").write_text("x = 1")
    (folder / "__pycache__").mkdir()

    submission = load_submission(Path(f"{folder}/"), MODULES)

    assert submission.learner == "pham_d"
    source = only_source(submission)
    assert (source.module, source.origin) == ("submission", "Bài tập GPU.ipynb")
    assert functions_defined(source) == {"pick_device"}


def test_folder_with_one_broken_file_of_another_name_spoils_every_exercise(tmp_path: Path) -> None:
    folder = tmp_path / "hoang_e"
    folder.mkdir()
    (folder / "bai.py").write_text("def f(:\n")

    problem = only_problem(load_submission(folder, MODULES))

    assert (problem.kind, problem.origin, problem.line) == ("syntax_error", "bai.py", 1)


@pytest.mark.parametrize(
    "files", [[], ["a.py", "b.py"], ["a.py", "a.ipynb"], ["readme.md"]], ids=str
)
def test_folder_with_nothing_usable_is_not_attempted(tmp_path: Path, files: list[str]) -> None:
    folder = tmp_path / "vu_f"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("x = 1\n")

    submission = load_submission(folder, MODULES)

    assert submission == Submission("vu_f", folder, {}, {})


def test_unsupported_suffix(tmp_path: Path) -> None:
    path = tmp_path / "bai_lam.txt"
    path.write_text("def pick_device(): pass\n")

    submission = load_submission(path, MODULES)

    assert submission.learner == "bai_lam"
    problem = only_problem(submission)
    assert (problem.kind, problem.origin, problem.line, problem.cell) == (
        "unsupported",
        "bai_lam.txt",
        None,
        None,
    )


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(GraderError, match="not found"):
        load_submission(tmp_path / "nobody.py", MODULES)


def test_submission_pickles_for_worker_processes(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "nb.ipynb", [v4.new_code_cell("x = 1")])
    submission = load_submission(path, MODULES)

    assert pickle.loads(pickle.dumps(submission)) == submission
