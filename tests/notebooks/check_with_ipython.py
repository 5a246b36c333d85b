"""Cross-check catalog.py with IPython itself: `python tests/notebooks/check_with_ipython.py [FILE ...]`.

NOT the grader and not part of the test suite: a rough stand-in for the "Run all, errors
allowed" semantics the grader promises, used to check that every `stopped` entry of
catalog.py is right on this (CPU-only) machine and that the functions the notebook leaves
behind work. Each file runs in a fresh subprocess, in a temporary folder, with IPython's
own input transformer (magics, `!`, `obj?`), `!pip` / `%pip` turned into no-ops, a
google.colab stub, input() raising, and a 10 s alarm per cell. A cell that stops at a
statement still runs the def / class / import statements after it. Cells holding the
lesson's N = 10000 speed test are not run (they take 30-40 s here): they count as timeouts.

Then it calls the exercise functions on the CPU (small sizes; fill_until_oom with a fake
OOM after 5 allocations) and, for the files whose `wrong` names an exercise, checks that
the mistake is the one left: roundtrip on the meta device must not raise when x.to() is
not assigned; train_steps in FP16 must call GradScaler.scale when it is correct.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def units(path: Path) -> list[tuple[str, str, bool]]:
    """(label, source, is_cell) for each unit the grader runs."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        nb = json.loads(text)
        out = []
        cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
        for k, cell in enumerate(cells, 1):
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            n = cell.get("execution_count")
            out.append((f"In [{n}]" if n is not None else f"cell {k}", src, True))
        return out
    lines = text.split("\n")
    if any(re.match(r"^# In\[[ \d]*\]:$", line) for line in lines):
        out, label, buf, k = [], None, [], 0
        for line in lines + ["# In[ ]:"]:
            m = re.match(r"^# In\[([ \d]*)\]:$", line)
            if m:
                if label is not None:
                    out.append((label, "\n".join(buf), True))
                k += 1
                label = f"In [{m[1].strip()}]" if m[1].strip() else f"cell {k}"
                buf = []
            elif label is not None:
                buf.append(line)
        return out
    if any(line.startswith("# %%") for line in lines):
        out, buf, kind, k = [], [], None, 0
        for line in lines + ["# %%"]:
            if line.startswith("# %%"):
                if kind == "code":
                    k += 1
                    out.append((f"cell {k}", "\n".join(buf), True))
                kind = "markdown" if "[markdown]" in line else "code"
                buf = []
            else:
                buf.append(line)
        return out
    return [("file", text, False)]


CHILD = r'''
import ast, builtins, json, signal, sys, types, warnings
warnings.simplefilter("ignore")
import torch
from IPython.core.interactiveshell import InteractiveShell

units = json.loads(sys.stdin.read())
shell = InteractiveShell.instance()
real_system = shell.system
shell.system = lambda cmd: None if cmd.strip().startswith("pip") else real_system(cmd)
real_getoutput = shell.getoutput
shell.register_magic_function(lambda line: None, "line", "pip")
google = types.ModuleType("google"); colab = types.ModuleType("google.colab")
colab.drive = types.SimpleNamespace(mount=lambda *a, **k: print("Mounted at /content/drive"))
google.colab = colab; sys.modules["google"] = google; sys.modules["google.colab"] = colab

class InputCalled(Exception): pass
class Timeout(Exception): pass
def fake_input(prompt=""):
    raise InputCalled(prompt)
def alarm(*_):
    raise Timeout()
signal.signal(signal.SIGALRM, alarm)
ns = shell.user_ns
ns["input"] = fake_input

def kind_of(e):
    if isinstance(e, InputCalled): return "input"
    if isinstance(e, Timeout): return "timeout"
    if isinstance(e, (SystemExit, KeyboardInterrupt)): return "exit"
    if isinstance(e, ModuleNotFoundError): return "missing_module"
    msg = str(e)
    if "not compiled with CUDA" in msg or "NVIDIA driver" in msg: return "no_gpu"
    return "error:" + type(e).__name__ + ": " + msg[:80]

import time as _time
slow = []

def run_stmts(stmts, filename):
    t0 = _time.perf_counter()
    failed = None
    for s in stmts:
        if failed is not None and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                      ast.Import, ast.ImportFrom)):
            continue
        code = compile(ast.Module([s], []), filename, "exec")
        try:
            signal.alarm(10)
            exec(code, ns)
        except BaseException as e:
            if failed is None:
                failed = kind_of(e)
        finally:
            signal.alarm(0)
    took = _time.perf_counter() - t0
    if took > 2 and failed != "timeout":
        slow.append([filename, round(took, 1)])
    return failed

stops = []
with shell.builtin_trap, shell.display_trap:
    for label, src, is_cell in units:
        if "N = 10000" in src and is_cell:
            stops.append([label, "timeout (not run)"]); continue
        py = shell.transform_cell(src) if is_cell else shell.transform_cell(src)
        try:
            tree = ast.parse(py)
        except SyntaxError:
            stops.append([label, "syntax_error"]); continue
        if is_cell:
            k = run_stmts(tree.body, label)
            if k: stops.append([label, k])
        else:
            for s in tree.body:
                src_line = py.split("\n")[s.lineno - 1]
                if "N = 10000" in src_line:
                    continue
                k = run_stmts([s], f"line {s.lineno}")
                if k: stops.append([f"line {s.lineno}", k])

# --- the functions left behind ---
problems = []
def check(name, fn):
    try:
        fn()
    except BaseException as e:
        problems.append(f"{name}: {type(e).__name__}: {e}"[:200])

cpu = torch.device("cpu")
def ex1():
    d = ns["pick_device"](); assert isinstance(d, torch.device) and d.type == "cpu", d
    info = ns["describe_device"](cpu)
    assert set(info) == {"type", "name", "count", "capability", "total_memory_bytes"}, info
    assert info["type"] == "cpu" and info["name"] and info["count"] == 1 and info["capability"] is None
    assert info["total_memory_bytes"] is None
def ex2():
    t = ns["time_matmul"](64, cpu, 2); assert isinstance(t, float) and t > 0
    s = ns["speedup"](64, cpu, 2); assert s > 0
    assert ns["SMALL_N_ANSWER"].strip().upper() == "B"
def ex3():
    x = torch.arange(10); r = ns["roundtrip"](x, cpu)
    assert torch.equal(r, x * 2 + 1) and r.dtype == x.dtype and torch.equal(x, torch.arange(10))
    h = torch.ones(3, dtype=torch.float16); assert ns["roundtrip"](h, cpu).dtype == torch.float16
    import numpy as np
    a = ns["to_numpy"](torch.randn(3, requires_grad=True)); assert isinstance(a, np.ndarray)
def ex4():
    count = {"n": 0}
    real = {f: getattr(torch, f) for f in ("empty", "zeros", "randn")}
    def fake(f):
        def alloc(*a, **k):
            count["n"] += 1
            if count["n"] > 5: raise torch.OutOfMemoryError("fake OOM")
            return real[f](1024, dtype=torch.float32)
        return alloc
    for f in real: setattr(torch, f, fake(f))
    try:
        got = ns["fill_until_oom"](cpu, 1)
    finally:
        for f, v in real.items(): setattr(torch, f, v)
    assert got == 5, got
    m = torch.nn.Linear(4, 3); opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss, micro = ns["train_step_with_backoff"](m, torch.randn(8, 4), torch.randint(0, 3, (8,)),
                                                torch.nn.CrossEntropyLoss(), opt)
    assert isinstance(loss, float) and micro == 8, (loss, micro)
def ex5():
    for dt in (None, torch.float16, torch.bfloat16):
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        out = ns["train_steps"](m, torch.randn(16, 4), torch.randint(0, 3, (16,)), cpu, steps=3, amp_dtype=dt)
        assert len(out) == 3 and all(type(v) is float for v in out), out
for name, fn in [("ex1", ex1), ("ex2", ex2), ("ex3", ex3), ("ex4", ex4), ("ex5", ex5)]:
    check(name, fn)

mistakes = {}
try:
    ns["roundtrip"](torch.arange(3), torch.device("meta")); mistakes["ex3"] = True
except Exception:
    mistakes["ex3"] = False
calls = {"n": 0}
real_scale = torch.amp.GradScaler.scale
def scale(self, outputs):
    calls["n"] += 1
    return real_scale(self, outputs)
torch.amp.GradScaler.scale = scale
m = torch.nn.Linear(4, 3)
ns["train_steps"](m, torch.randn(8, 4), torch.randint(0, 3, (8,)), cpu, steps=2, amp_dtype=torch.float16)
mistakes["ex5"] = calls["n"] == 0
print("@@RESULT@@" + json.dumps({"stops": stops, "problems": problems, "mistakes": mistakes, "slow": slow}))
'''


def run(case, tmp: Path) -> list[str]:
    us = units(case.path)
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(us), capture_output=True, text=True,
                          cwd=tmp, timeout=600, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("@@RESULT@@")), None)
    if line is None:
        return [f"child failed: {proc.stderr[-2000:]}"]
    got = json.loads(line.removeprefix("@@RESULT@@"))
    bad = []
    detail = [(label, kind.replace(" (not run)", "")) for label, kind in got["stops"]]
    stops = [(label, kind.split(":")[0]) for label, kind in detail]
    if stops != list(case.stopped):
        bad.append(f"stops differ:\n    expected {list(case.stopped)}\n    got      {detail}")
    for label, seconds in got["slow"]:
        bad.append(f"slow: {label} took {seconds} s (the grader stops a cell at 10 s)")
    for p in got["problems"]:
        ex = p.split(":")[0]
        if ex not in case.wrong:
            bad.append(f"function problem: {p}")
    for ex, is_wrong in got["mistakes"].items():
        if is_wrong != (ex in case.wrong):
            bad.append(f"{ex}: mistake present={is_wrong}, catalog wrong={case.wrong}")
    return bad


def main(argv: list[str]) -> int:
    import tempfile

    sys.path.insert(0, str(HERE))
    from catalog import CASES

    failures = 0
    for case in CASES:
        if argv and case.file not in argv:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            bad = run(case, Path(tmp))
        print(("ok   " if not bad else "FAIL ") + case.file)
        for b in bad:
            print("     " + b)
        failures += bool(bad)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
