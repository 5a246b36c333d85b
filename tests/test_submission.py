"""Loading submissions: every file is written in tmp_path, and no learner code is run."""

from __future__ import annotations

import ast
import json
import pickle
import random
import unicodedata
from pathlib import Path

import nbformat
import pytest
import torch
from nbformat import v4

from grader.course import load_course
from grader.errors import GraderError
from grader.intake.submission import LoadProblem, Submission, load_submission
from grader.score.scoring import absent_outcome
from grader.score.texts import render
from grader.wire.ipython import LexState, scan
from grader.wire.messages import Cell, Source
from tests.submissions.catalog import MODULES


def write_notebook(path: Path, cells: list[nbformat.NotebookNode]) -> Path:
    path.write_text(nbformat.writes(v4.new_notebook(cells=cells)), encoding="utf-8")
    return path


def functions_defined(source: Source) -> set[str]:
    # Parsing, not running: these tests obey the same rule as the grader's parent process.
    compile(source.text, source.origin, "exec", dont_inherit=True)
    return {node.name for node in ast.parse(source.text).body if isinstance(node, ast.FunctionDef)}


def only_source(submission: Submission) -> Source:
    assert submission.problems == {}
    assert set(submission.sources) == set(MODULES)
    distinct = {id(source) for source in submission.sources.values()}
    assert len(distinct) == 1, "a single file serves every exercise with one Source"
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
    # A plain .py runs statement by statement, each labelled by its first line.
    cells = (Cell("line 1", 1, 1), Cell("line 3", 3, 4), Cell("line 6", 6, 6), Cell("line 8", 8, 9))
    assert source == Source("submission", text, "nguyen_van_a.py", cells, numbered=False)
    assert functions_defined(source) == {"pick_device"}
    assert source.where(4) == "nguyen_van_a.py, line 4"


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
    # IPython forms become the calls IPython itself makes of them (answered by grader/learner/kernel.py).
    assert source.text.split("\n") == [
        "get_ipython().run_line_magic('matplotlib', 'inline')",
        "get_ipython().system('pip install x')",
        "import torch",
        "from google.colab import drive",
        "if torch.cuda.is_available():",
        "    get_ipython().system('nvidia-smi')",
        "files = get_ipython().getoutput('ls')",
        "get_ipython().run_line_magic('pinfo', 'torch.cuda')",
        "get_ipython().run_cell_magic('bash', '', ''",
        "    'nvidia-smi\\n'",
        "    '  if [ -d x ]; then echo y; fi\\n')",
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
    assert source.cells == (Cell("cell 1", 1, 4), Cell("cell 2", 5, 8), Cell("cell 3", 9, 11),
                            Cell("cell 4", 12, 17), Cell("cell 5", 18, 18))
    assert source.numbered
    assert source.where(14) == "colab.ipynb, cell 4, line 3"
    assert functions_defined(source) == {"pick_device", "describe_device"}


def test_execution_counts_label_the_cells(tmp_path: Path) -> None:
    cells = [v4.new_code_cell("import torch", execution_count=8), v4.new_code_cell("x = 1"),
             v4.new_code_cell("y = 2", execution_count=3)]
    source = only_source(load_submission(write_notebook(tmp_path / "nb.ipynb", cells), MODULES))
    assert [c.label for c in source.cells] == ["In [8]", "cell 2", "In [3]"]
    assert source.where(3) == "nb.ipynb, In [3], line 1"


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
        "import torch\n\ndef pick_device():\n    return 1\nget_ipython().system('nvidia-smi')\nx = 1\n"
    )
    assert source.cells == (Cell("cell 1", 1, 4), Cell("cell 2", 5, 6))
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
            "get_ipython().system('pip install torch')\n#     torch",
            id="continued-shell-line",
        ),
        pytest.param(
            "%%writefile helper.py\ndef pick_device():\n    return 1",
            "get_ipython().run_cell_magic('writefile', 'helper.py', ''\n    'def pick_device():\\n'\n"
            "    '    return 1\\n')",
            id="foreign-cell-magic",
        ),
        pytest.param("%%html", "get_ipython().run_cell_magic('html', '', '')", id="cell-magic-without-body"),
        pytest.param(
            "\n%%capture out\n!pip install x\nimport torch",
            "\nget_ipython().run_cell_magic('capture', 'out', ''\n    '!pip install x\\n'\n    'import torch\\n')",
            id="capture-body-to-the-kernel",
        ),
        pytest.param(
            "%%time\n!pip install x\nimport torch",
            "pass  # %%time\nget_ipython().system('pip install x')\nimport torch",
            id="time-body-runs",
        ),
        pytest.param(
            "a, b = %timeit -o f()", "a, b = get_ipython().run_line_magic('timeit', '-o f()')", id="magic-rhs"
        ),
        pytest.param("files = !ls -l", "files = get_ipython().getoutput('ls -l')", id="shell-rhs"),
        pytest.param("!!ls", "get_ipython().getoutput('ls')", id="double-bang"),
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
    assert source.text.count("\n") == cell.count("\n") + 1  # one line for one line
    compile(source.text, "nb", "exec", dont_inherit=True)


def _scan_a_character_at_a_time(line: str, state: LexState) -> LexState:
    """The scanner's rules as first written, one character at a time: the oracle for its faster form."""
    quote, depth, code_end, i = state.quote, state.depth, len(line), 0
    while i < len(line):
        char = line[i]
        if quote is not None:
            if char == "\\":
                i += 2
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
        quote = None
    return LexState(quote, depth, quote is None and ends_with_backslash, code_end)


def test_scan_agrees_with_a_character_at_a_time() -> None:
    """``scan`` jumps between the characters that matter; it must end every line where the plain
    character-at-a-time reading does, from every state: each line of the grader's own sources, of the
    solutions and of PyTorch's nn and optim packages, read in order as ``neutralise`` reads them, and
    200 000 random lines of the characters the rules turn on, from random states."""
    root = Path(__file__).resolve().parent.parent
    files = [*sorted((root / "grader").rglob("*.py")), *sorted((root / "solutions").glob("*.py")),
             *sorted((Path(torch.__file__).parent / "nn").rglob("*.py"))[:150],
             *sorted((Path(torch.__file__).parent / "optim").glob("*.py"))]
    lines = 0
    for file in files:
        state = LexState()
        for line in file.read_text(encoding="utf-8").split("\n"):
            fast = scan(line, state)
            assert fast == _scan_a_character_at_a_time(line, state), (file, line, state)
            state, lines = fast, lines + 1
    assert lines > 50_000
    rng = random.Random(14)
    alphabet = "ab #'\"\\()[]{}%!?= "
    states = [LexState(quote, depth, continued) for quote in (None, "'", '"', "'''", '"""')
              for depth in (0, 2) for continued in (False, True)]
    for _ in range(200_000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 14)))
        state = rng.choice(states)
        assert scan(line, state) == _scan_a_character_at_a_time(line, state), (line, state)


def test_colab_py_export_with_shell_lines_compiles(tmp_path: Path) -> None:
    path = tmp_path / "export.py"
    path.write_text("!pip install -q torch\n%matplotlib inline\ndef f():\n    return 1\n")

    source = only_source(load_submission(path, MODULES))

    assert source.text.startswith("get_ipython().system('pip install -q torch')\n"
                                  "get_ipython().run_line_magic('matplotlib', 'inline')\n")
    assert [c.label for c in source.cells] == ["line 1", "line 2", "line 3"]
    assert functions_defined(source) == {"f"}


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        pytest.param("#!/usr/bin/env python\n# coding: utf-8\n\n# In[3]:\n\n\nimport torch\n\n\n# In[ ]:\n\n\n"
                     "get_ipython().system('nvidia-smi')\n\n\n# # Bài 2\n\n# In[7]:\n\n\nx = 1\n",
                     ["In [3]", "cell 2", "In [7]"], id="nbconvert-script"),
        pytest.param("# %% [markdown]\n# # Bài 1\n\n# %%\nimport torch\n\n# %%\n!nvidia-smi\n"
                     "# %% tags=['x']\n%%time\ny = 2\n", ["cell 1", "cell 2", "cell 3"], id="percent-format"),
    ],
)
def test_exported_notebook_keeps_its_cells(tmp_path: Path, text: str, labels: list[str]) -> None:
    path = tmp_path / "export.py"
    path.write_text(text, encoding="utf-8")
    source = only_source(load_submission(path, MODULES))
    assert [c.label for c in source.cells] == labels
    assert source.numbered
    compile(source.text, "export.py", "exec", dont_inherit=True)


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


def test_a_cell_that_does_not_compile_is_still_a_cell(tmp_path: Path) -> None:
    # The sandbox records it and runs the next cell, as Jupyter does; the loader only cuts cells.
    cells = [
        v4.new_code_cell("import torch"),
        v4.new_markdown_cell("Bài 2"),
        v4.new_code_cell("def a():\n    return 1"),
        v4.new_code_cell("x = 1\ndef roundtrip(x, device:\n    return x"),
        v4.new_code_cell("def b():\n    return 2"),
    ]
    path = write_notebook(tmp_path / "nb.ipynb", cells)

    source = only_source(load_submission(path, MODULES))

    assert [c.label for c in source.cells] == ["cell 1", "cell 2", "cell 3", "cell 4"]
    broken = source.cells[2]
    with pytest.raises(SyntaxError):
        compile(source.cell_text(broken), "nb", "exec")
    for cell in (c for c in source.cells if c is not broken):
        compile(source.cell_text(cell), "nb", "exec")


def test_a_py_that_does_not_parse_is_cut_at_its_statements(tmp_path: Path) -> None:
    lines = ["import torch", "", "", "@torch.no_grad()", "def pick_device():", "    return 1", "",
             "def f(:", "    pass", "", "x = (1,", "     2)", "", "class K:", "    pass"]
    path = tmp_path / "sub.py"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    source = only_source(load_submission(path, MODULES))

    # One broken function costs only itself: the statement after an unclosed bracket still starts.
    assert source.cells == (Cell("line 1", 1, 1), Cell("line 4", 4, 6), Cell("line 8", 8, 9),
                            Cell("line 11", 11, 12), Cell("line 14", 14, 15))
    assert not source.numbered
    compiles = []
    for cell in source.cells:
        try:
            compile(source.cell_text(cell), "sub.py", "exec")
            compiles.append(True)
        except SyntaxError:
            compiles.append(False)
    assert compiles == [True, True, False, True, True]


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


def test_null_byte_is_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "nul.py"
    path.write_bytes(b"x = 1\ny = 2\x00\n")

    source = only_source(load_submission(path, MODULES))

    assert [c.label for c in source.cells] == ["line 1", "line 2"]  # the second does not compile


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
    assert set(submission.sources) == {"ex1", "ex2", "ex3"}
    ex1, ex2, ex3 = submission.sources["ex1"], submission.sources["ex2"], submission.sources["ex3"]
    assert (ex1.module, ex1.origin, ex1.numbered) == ("ex1_device", "ex1_device.py", False)
    assert (ex3.module, ex3.origin, ex3.cells) == (
        "ex3_roundtrip",
        "ex3_roundtrip.ipynb",
        (Cell("cell 1", 1, 1), Cell("cell 2", 2, 3)),
    )
    assert functions_defined(ex1) == {"pick_device"}
    assert functions_defined(ex3) == {"roundtrip"}
    # ex2 does not compile: it still loads, and the sandbox records its statement as stopped.
    assert (ex2.module, [c.label for c in ex2.cells]) == ("ex2_timing", ["line 1"])
    assert submission.problems == {}


def test_a_folder_s_other_modules_are_importable_helpers(tmp_path: Path) -> None:
    """A folder's other ``.py`` files come along as modules its exercise files may import
    (``from common import sync``), read as an exercise's file is; a name no ``import`` could spell, a
    notebook, a link, an exercise's twin and what would take them past one file's size limit in all do not."""
    folder = tmp_path / "ngo_h"
    folder.mkdir()
    (folder / "ex2_timing.py").write_text("from common import sync\n")
    (folder / "common.py").write_text("def sync(device):\n    pass\n")
    (folder / "plotting_utils.py").write_text("import matplotlib\n")
    (folder / "ex2_timing (1).py").write_text("x = 1\n")  # an exercise's second download: not a module name
    (folder / "class.py").write_text("x = 1\n")  # a keyword: `import class` does not parse
    (folder / "submission.py").write_text("x = 1\n")  # the single-file form's module name
    (folder / "big.py").write_text("x = 1\n" * 100)  # 600 bytes, over the limit alone
    (folder / "zz_last.py").write_text("y = 2\n" * 30)  # 180 bytes, over what the two above leave of 200
    write_notebook(folder / "scratch.ipynb", [v4.new_code_cell("x = 1")])
    (folder / "linked.py").symlink_to(folder / "common.py")

    submission = load_submission(folder, MODULES, max_bytes=200)

    assert set(submission.sources) == {"ex2"}
    assert [(h.module, h.origin, h.text) for h in submission.helpers] == [
        ("common", "common.py", "def sync(device):\n    pass\n"),
        ("plotting_utils", "plotting_utils.py", "import matplotlib\n"),
    ]
    single = tmp_path / "single.py"
    single.write_text("def pick_device():\n    return 1\n")
    assert load_submission(single, MODULES).helpers == ()


def test_folder_files_renamed_on_their_way_are_found_when_unambiguous(tmp_path: Path) -> None:
    """An editor's capitals and dashes, a browser's second download ("ex5_amp (1).ipynb"): each still
    names one exercise's file, which is graded under the exercise's module; the name as written wins
    over a renamed copy, and two renamed candidates for one exercise would be a guess: neither."""
    folder = tmp_path / "dang_g"
    folder.mkdir()
    (folder / "Ex1_Device.py").write_text("def pick_device():\n    return 1\n")
    (folder / "ex2_timing.py").write_text("def time_matmul(n, device, repeats=5):\n    return 0.0\n")
    (folder / "ex2_timing (1).py").write_text("def time_matmul(n, device, repeats=5):\n    return 1.0\n")
    (folder / "ex3-roundtrip.py").write_text("def roundtrip(x, device):\n    return x\n")
    (folder / "EX4_OOM.py").write_text("def fill_until_oom(device, chunk_mb=64):\n    return 0\n")
    (folder / "ex4_oom (2).py").write_text("def fill_until_oom(device, chunk_mb=64):\n    return 1\n")
    write_notebook(folder / "ex5_amp (1).ipynb", [v4.new_code_cell("def train_steps():\n    return []")])

    submission = load_submission(folder, MODULES)

    assert set(submission.sources) == {"ex1", "ex2", "ex3", "ex5"}, submission
    assert submission.others == ("EX4_OOM.py", "ex4_oom (2).py")  # what ex4's "no file" message names
    origins = {ex: (source.module, source.origin) for ex, source in submission.sources.items()}
    assert origins == {"ex1": ("ex1_device", "Ex1_Device.py"), "ex2": ("ex2_timing", "ex2_timing.py"),
                       "ex3": ("ex3_roundtrip", "ex3-roundtrip.py"), "ex5": ("ex5_amp", "ex5_amp (1).ipynb")}
    assert functions_defined(submission.sources["ex3"]) == {"roundtrip"}
    assert submission.problems == {}


@pytest.mark.parametrize("names", [
    ("Copy of ex1_device.ipynb", "Copy of ex3_roundtrip.ipynb"),  # Colab's "Save a copy in Drive", downloaded
    (unicodedata.normalize("NFD", "Bản sao của ex1_device.ipynb"), "Bản sao của ex3_roundtrip.ipynb"),  # in Vietnamese
    ("ex1_device-Copy1.ipynb", "ex3_roundtrip-Copy2.ipynb"),  # Jupyter's "Duplicate"
    ("ex1_device - Copy.py", "ex3_roundtrip - Copy (2).py"),  # Windows Explorer's copy
    ("ex1_device-1.py", "ex3_roundtrip-2.ipynb"),  # Canvas's resubmitted files
], ids=["colab", "colab_vi", "jupyter", "windows", "canvas"])
def test_folder_of_copies_of_exercise_files_grades_each(tmp_path: Path, names: tuple[str, str]) -> None:
    folder = tmp_path / "ly_h"
    folder.mkdir()
    for name, code in zip(names, ("def pick_device():\n    return 1", "def roundtrip(x, device):\n    return x"),
                          strict=True):
        if name.endswith(".ipynb"):
            write_notebook(folder / name, [v4.new_code_cell(code)])
        else:
            (folder / name).write_text(code + "\n")

    submission = load_submission(folder, MODULES)

    assert {ex: source.origin for ex, source in submission.sources.items()} == {"ex1": names[0], "ex3": names[1]}


def test_an_absent_exercise_names_what_the_folder_holds(tmp_path: Path) -> None:
    """A folder whose other files the grader cannot take as an exercise's (``bai1.py``): each absent
    exercise's message names them, escaped, so the learner sees which file to rename; the files that
    serve an exercise, or a notebook twin of one, are not named."""
    folder = tmp_path / "mai_k"
    folder.mkdir()
    (folder / "ex3_roundtrip.py").write_text("def roundtrip(x, device):\n    return x\n")
    write_notebook(folder / "ex3_roundtrip.ipynb", [v4.new_code_cell("x = 1")])
    (folder / "bai1.py").write_text("def pick_device():\n    return 1\n")
    (folder / "bai\x1b[31m2.ipynb").write_text("{}")
    course = load_course()
    submission = load_submission(folder, course.modules)
    assert set(submission.sources) == {"ex3"} and submission.others == ("bai\\x1b[31m2.ipynb", "bai1.py")

    ex1 = next(ex for ex in course.exercises if ex.id == "ex1")
    outcome = absent_outcome(ex1.checks[0].id, ex1, submission)
    assert (outcome.status, outcome.message_id) == ("not_attempted", "absent_others")
    text = render("en", outcome.message_id, outcome.params)
    assert "no file ex1_device.py / ex1_device.ipynb" in text and "bai\\x1b[31m2.ipynb, bai1.py" in text, text
    assert "\x1b" not in text


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


def test_folder_with_one_broken_file_of_another_name_serves_every_exercise(tmp_path: Path) -> None:
    folder = tmp_path / "hoang_e"
    folder.mkdir()
    (folder / "bai.py").write_text("def f(:\n")

    source = only_source(load_submission(folder, MODULES))

    assert (source.origin, [c.label for c in source.cells]) == ("bai.py", ["line 1"])


@pytest.mark.parametrize(
    "files", [[], ["a.py", "b.py"], ["a.py", "a.ipynb"], ["readme.md"]], ids=str
)
def test_folder_with_nothing_usable_is_not_attempted(tmp_path: Path, files: list[str]) -> None:
    folder = tmp_path / "vu_f"
    folder.mkdir()
    for name in files:
        (folder / name).write_text("x = 1\n")

    submission = load_submission(folder, MODULES)

    # What it holds of .py and .ipynb files is kept for the "no file" message (two would be a guess).
    others = tuple(sorted(name for name in files if name.endswith((".py", ".ipynb"))))
    assert submission == Submission("vu_f", folder, {}, {}, "vu_f", others)


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


# IPython's own transformer is the reference for what a line magic or a shell escape means.
IPYTHON_LINES = [
    "!nvidia-smi", "!pip install -q torchinfo", "files = !ls -la", "%matplotlib inline", "%load_ext autoreload",
    "t = %timeit -o f()", "%time x = f()", "%env CUDA_VISIBLE_DEVICES=0", "torch.cuda?", "%pip install x",
    "  !echo indented", "a, b = %who_ls", "%cd /content", "!!date",
]


@pytest.mark.parametrize("line", IPYTHON_LINES)
def test_line_forms_become_what_ipython_makes_of_them(tmp_path: Path, line: str) -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    cell = f"if True:\n{line}" if line.startswith(" ") else line
    path = write_notebook(tmp_path / "nb.ipynb", [v4.new_code_cell(cell)])
    ours = only_source(load_submission(path, MODULES)).text.rstrip("\n")
    assert ours == TransformerManager().transform_cell(cell).rstrip("\n")
