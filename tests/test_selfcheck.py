"""grader.check() in a real Jupyter kernel, ``grader check`` in a terminal, and how cells are replayed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat import v4

from tests.conftest import ROOT, STUBS, run_cli, solution_text


# Depending on their versions, jupyter_client, jupyter_core, nbclient, nbconvert and zmq warn
# about their own deprecations (platformdirs paths, utcnow, ...) while a kernel starts and
# stops; that says nothing about the grader. Only the tests that start a kernel ignore those,
# and only DeprecationWarnings raised from those packages.
def kernel_warnings(test: Any) -> Any:
    for package in ("jupyter_client", "jupyter_core", "nbclient", "nbconvert", "zmq"):
        test = pytest.mark.filterwarnings(f"ignore::DeprecationWarning:{package}")(test)
    return test


RESULT_CELL = "import json\nprint('RESULT=' + json.dumps(dict(r), ensure_ascii=False))"


def run_notebook(cells: list[Any], folder: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Execute ``cells`` in a fresh ipykernel (cwd ``folder``); raise if a cell raises unexpectedly."""
    from nbconvert.preprocessors import ExecutePreprocessor

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's grader
    notebook = v4.new_notebook(cells=cells)
    ExecutePreprocessor(timeout=600, kernel_name="python3").preprocess(notebook, {"metadata": {"path": str(folder)}})
    (folder / "executed.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")  # kept for debugging
    return notebook


def outputs(cell: Any, kind: str) -> str:
    """All text of one mime type (or stream) that a cell produced."""
    parts = []
    for out in cell.get("outputs", []):
        if kind == "stream" and out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif kind in out.get("data", {}):
            parts.append(out["data"][kind])
    return "".join(parts)


def result_of(cell: Any) -> dict[str, Any]:
    line = next(line for line in outputs(cell, "stream").splitlines() if line.startswith("RESULT="))
    return json.loads(line[len("RESULT="):])  # type: ignore[no-any-return]


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["status"] for ex in result["exercises"].values() for c in ex["checks"]}


@kernel_warnings
def test_correct_notebook_passes_every_public_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cells = [
        v4.new_code_cell("%env DEMO=1\n!echo setup"),
        v4.new_code_cell(solution_text("ex1")),
        # Run before the fix below: it raised then, and replaying it would spoil the check.
        v4.new_code_cell("roundtrip(torch.arange(3), pick_device())", metadata={"tags": ["raises-exception"]}),
        v4.new_code_cell("def broken(:\n    pass", metadata={"tags": ["raises-exception"]}),
        v4.new_code_cell(solution_text("ex3") + "\nprint(roundtrip(torch.arange(3), pick_device()))"),
        v4.new_code_cell("import grader\n\nr = grader.check()\nr"),
        v4.new_code_cell(RESULT_CELL),
    ]
    notebook = run_notebook(cells, tmp_path, monkeypatch)
    check_cell, result = notebook.cells[5], result_of(notebook.cells[6])
    assert set(result["exercises"]) == {"ex1", "ex3"}  # the exercises this notebook defines
    assert statuses(result) == {
        "ex1.pick_device_returns_device": "passed", "ex1.describe_device_keys": "passed",
        "ex1.pick_device_falls_back_to_cpu": "passed",
        "ex3.roundtrip_values": "passed", "ex3.to_numpy_cpu": "passed",
        "ex3.roundtrip_computes_on_device": "passed", "ex3.roundtrip_input_unchanged": "passed",
    }
    assert result["score"] == result["max_score"] == 21.0
    # `r = grader.check()` is replayed in the sandbox too; there it must do nothing.
    assert "Tự kiểm tra" not in result["output"] and "Self-check" not in result["output"]
    assert all(c["visibility"] == "public" for ex in result["exercises"].values() for c in ex["checks"])
    html, text = outputs(check_cell, "text/html"), outputs(check_cell, "text/plain")
    assert "<table>" in html and "ex3.roundtrip_values" in html
    assert "Tự kiểm tra" in text and "✓ ex1.describe_device_keys" in text and "đạt" in text  # vi by default
    assert "<grader.check: 21 / 21>" in text  # Out[..] is one line, the table is already shown


@kernel_warnings
def test_mistakes_are_shown_and_never_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong_ex1 = solution_text("ex1").replace('return torch.device("cpu")', 'return "cpu"')
    assert wrong_ex1 != solution_text("ex1")
    crashing_ex3 = solution_text("ex3").replace("    y = x.to(device)", "    import os\n    os._exit(3)\n    y = x")
    cells = [
        v4.new_code_cell(wrong_ex1),
        v4.new_code_cell(crashing_ex3),
        v4.new_code_cell('import grader\n\nr = grader.check(lang="en")'),
        v4.new_code_cell(RESULT_CELL),
        v4.new_code_cell('r = grader.check("ex9")'),
        v4.new_code_cell("import grader.commands.selfcheck\n\n"
                         "def boom(*args, **kwargs):\n    raise RuntimeError('grader bug')\n\n"
                         "grader.commands.selfcheck.grade_public = boom\n"
                         'r = grader.check("ex1", lang="en")'),
        v4.new_code_cell(RESULT_CELL),
        v4.new_code_cell("print('kernel alive')"),
    ]
    notebook = run_notebook(cells, tmp_path, monkeypatch)  # raises if any cell raised
    result = result_of(notebook.cells[3])
    found = statuses(result)
    assert found["ex1.pick_device_returns_device"] == "failed"
    assert found["ex1.describe_device_keys"] == "passed"
    assert found["ex3.roundtrip_values"] == "error"  # os._exit ended the sandbox's child, not the kernel
    text = outputs(notebook.cells[2], "text/plain")
    assert "pick_device() must return a torch.device, not str" in text
    assert "Hint:" in text and "In [7]" in text
    assert "Không có bài tập 'ex9'" in outputs(notebook.cells[4], "text/plain")
    bug = result_of(notebook.cells[6])
    assert "grader bug" in outputs(notebook.cells[5], "text/plain")
    assert {c["status"] for c in bug["exercises"]["ex1"]["checks"]} == {"skipped"}  # no verdict on the code
    assert "grader bug" in bug["grader_error"]
    assert "kernel alive" in outputs(notebook.cells[7], "stream")


# --- `grader check` in a terminal --------------------------------------------------------


def exercises_folder(tmp_path: Path, **texts: str) -> Path:
    folder = tmp_path / "exercises"
    folder.mkdir()
    for stub in STUBS.glob("*.py"):
        (folder / stub.name).write_text(texts.get(stub.stem, stub.read_text(encoding="utf-8")), encoding="utf-8")
    return folder


def test_cli_check_one_exercise_in_exercises_folder(tmp_path: Path) -> None:
    wrong = solution_text("ex3").replace("y = y * 2 + 1", "y = y * 2")
    exercises_folder(tmp_path, ex3_roundtrip=wrong)
    proc = run_cli("check", "ex3", "--lang", "en", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "✗ ex3.roundtrip_values" in out and "✓ ex3.to_numpy_cpu" in out
    assert "compute x * 2 + 1" in out and "Hint:" in out
    assert "ex1." not in out and "roundtrip_returns_cpu" not in out  # one exercise, public checks only
    assert "✓ ex3.roundtrip_computes_on_device" in out  # the lesson's headline mistake is public
    assert "Score: 9 / 13" in out
    assert "Traceback" not in proc.stderr


def test_cli_check_all_stubs_vietnamese(tmp_path: Path) -> None:
    folder = exercises_folder(tmp_path, ex1_device=solution_text("ex1"))
    proc = run_cli("check", "--dir", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert "✓ ex1.pick_device_returns_device" in proc.stdout
    assert "· ex5.fp32_losses" in proc.stdout and "chưa làm" in proc.stdout
    assert "Điểm: 8 / 43" in proc.stdout


@pytest.mark.parametrize(("args", "error"), [
    (("check", "ex9"), "unknown exercise 'ex9'"),
    (("check", "--dir", "missing"), "no folder missing"),
])
def test_cli_check_usage_errors(tmp_path: Path, args: tuple[str, ...], error: str) -> None:
    exercises_folder(tmp_path)
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert error in proc.stderr and "Traceback" not in proc.stderr


def test_import_grader_stays_cheap() -> None:
    heavy = "{'grader.commands.selfcheck', 'grader.grading', 'torch', 'yaml', 'nbformat', 'IPython'}"
    code = f"import sys, grader\nprint(grader.__version__, sorted({heavy} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stdout.split() == ["0.1.0", "[]"]
