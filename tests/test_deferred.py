"""grader/learner/deferred.py: a learner process imports ``torch._dynamo`` when its code compiles, not at
its first optimizer step — and PyTorch behaves as if nothing were deferred.

Each side runs in a fresh Python (this test process has long imported ``torch._dynamo``): the same
script with the module deferred and without, whose answers must match."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, Graded, copy_solutions, course_with

# Eager training with what learners' code uses (the optimizers' step, zero_grad, state_dict,
# load_state_dict, add_param_group; a scheduler; GradScaler), then torch.compile of a whole step,
# `import torch._dynamo.config` and the learner's own torch._dynamo.disable. Prints one JSON line.
SCRIPT = r'''
import json, sys, threading
import torch
if sys.argv[1] == "defer":
    from grader.learner.deferred import defer_dynamo
    defer_dynamo()

def loaded():
    return "torch._dynamo.eval_frame" in sys.modules

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
extra = torch.nn.Linear(2, 2)
optimizers = [torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
              torch.optim.Adam(model.parameters(), lr=1e-2),
              torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)]
optimizers[0].add_param_group({"params": extra.parameters()})
scheduler = torch.optim.lr_scheduler.StepLR(optimizers[1], step_size=2)
scaler = torch.amp.GradScaler("cpu")
losses = []
for step in range(6):
    opt = optimizers[step % 3]
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = extra(model(torch.randn(4, 8))).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    scheduler.step()
    losses.append(loss.item())
state = optimizers[1].state_dict()
optimizers[1].load_state_dict(state)
eager_loaded = loaded()

threads_seen = []
def first_use():
    threads_seen.append(callable(torch._dynamo.reset))
compiled = torch.compile(model, backend="eager")  # Dynamo's part; no code generated
out = compiled(torch.ones(3, 8)).sum().item()
@torch.compile(backend="eager")
def train_step(x):
    optimizers[1].zero_grad()
    l = model(x).pow(2).mean()
    l.backward()
    optimizers[1].step()
    return l
step_losses = [train_step(torch.ones(4, 8) * i).item() for i in range(3)]
import torch._dynamo.config
from torch._dynamo.utils import counters
disabled = torch._dynamo.disable(lambda x: x + 1)
workers = [threading.Thread(target=first_use) for _ in range(4)]
for w in workers: w.start()
for w in workers: w.join()
print(json.dumps({
    "losses": losses, "eager_loaded": eager_loaded, "compiled": out, "step_losses": step_losses,
    "graph_breaks": sorted(k.split("\n")[0] for k in counters["graph_break"]),
    "graphs": counters["stats"]["unique_graphs"], "cache_size_limit": torch._dynamo.config.cache_size_limit,
    "disabled": disabled(1), "marked": getattr(disabled, "_torchdynamo_disable", False),
    "threads": threads_seen, "same_module": torch._dynamo is sys.modules["torch._dynamo"],
}))
'''


def _run_both() -> dict[str, dict[str, Any]]:
    procs = {mode: subprocess.Popen([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for mode in ("defer", "plain")}
    answers = {}
    for mode, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
        answers[mode] = json.loads(stdout.strip().splitlines()[-1])
    return answers


def test_an_eager_training_never_imports_dynamo_and_compiling_later_is_as_without_deferral() -> None:
    answers = _run_both()
    deferred, plain = answers["defer"], answers["plain"]
    assert deferred["eager_loaded"] is False  # SGD, Adam, AdamW, a scheduler, GradScaler, state dicts
    assert plain["eager_loaded"] is True  # what PyTorch alone does at the first step
    assert deferred["losses"] == plain["losses"]
    # Compiled after eager steps: the same values, graphs and graph breaks (zero_grad's disable,
    # the optimizer's graph_break calls) as in a process that imported it at its first step.
    for key in ("compiled", "step_losses", "graph_breaks", "graphs", "cache_size_limit", "disabled", "marked",
                "same_module"):
        assert deferred[key] == plain[key], key
    assert deferred["graph_breaks"], "the compiled step met no graph break: it checks nothing"
    assert deferred["marked"] is True and deferred["threads"] == [True] * 4


def test_a_learner_process_imports_dynamo_only_when_its_code_compiles(tmp_path: Path,
                                                                     grade: Callable[..., Graded]) -> None:
    """A learner process grading ex4 and ex5 (both train) never imports torch._dynamo; one whose
    code uses Dynamo does, and is graded as before."""
    trains = copy_solutions(tmp_path / "a", "trains", only=("ex4", "ex5"))
    uses_dynamo = copy_solutions(tmp_path / "b", "uses_dynamo", only=("ex5",))
    for folder, extra in ((trains, ""), (uses_dynamo, USES_DYNAMO)):
        ex5 = folder / "ex5_amp.py"
        ex5.write_text(ex5.read_text(encoding="utf-8") + SAYS_IF_LOADED + extra, encoding="utf-8")
    for folder, loaded, score in ((trains, False, 40.0), (uses_dynamo, True, 20.0)):
        graded = grade(folder)
        assert graded.report is not None, graded.stderr[-2000:]
        assert graded.report["score"] == score, graded.report
        assert f"dynamo loaded after training: {loaded}" in graded.report["output"], graded.report["output"][-2000:]


# The learner's train_steps, wrapped: after each training, whether torch._dynamo's real modules exist
# (read without touching the module, which would import it).
SAYS_IF_LOADED = '''

import sys as _sys
_train_steps = train_steps


def train_steps(*args, **kwargs):
    losses = _train_steps(*args, **kwargs)
    print("dynamo loaded after training:", "torch._dynamo.eval_frame" in _sys.modules)
    return losses
'''
USES_DYNAMO = '''

import torch._dynamo.config
torch._dynamo.config.cache_size_limit = 16  # the learner's own use of Dynamo, at its top level
'''


# A learner's first cell uses Dynamo (PyTorch's module loads there, ~2 s) under a 0.3 s cell limit.
FIRST_CELL_USES_DYNAMO = '''# %%
import torch
torch._dynamo.reset()

# %%
'''
USABLE_AFTER = '''

_train_steps = train_steps


def train_steps(*args, **kwargs):
    losses = _train_steps(*args, **kwargs)
    print("dynamo usable after the cut:", isinstance(torch._dynamo.config.cache_size_limit, int))
    return losses
'''


def test_a_cell_limit_while_dynamo_loads_leaves_it_whole(tmp_path: Path, grade: Callable[..., Graded]) -> None:
    """A cell limit that lands while PyTorch's torch._dynamo is executed into the deferred module waits
    for it (an importlib frame is on the stack, as in any import): the module is whole for every later
    use — ex5's training (its optimizers' disabled functions), Dynamo's config — and the limit costs
    nothing; the cell is cut after the load or ends first."""
    folder = copy_solutions(tmp_path, "cut", only=("ex5",))
    ex5 = folder / "ex5_amp.py"
    ex5.write_text(FIRST_CELL_USES_DYNAMO + ex5.read_text(encoding="utf-8") + USABLE_AFTER, encoding="utf-8")
    course = course_with(tmp_path, {"cell_timeout_s: 10": "cell_timeout_s: 0.3"})
    graded = grade(folder, "--course", str(course))
    assert graded.report is not None, graded.stderr[-2000:]
    assert graded.report["score"] == 20.0, graded.report
    assert [stop["kind"] for stop in graded.report["top_level"]] in ([], ["timeout"]), graded.report["top_level"]
    assert "dynamo usable after the cut: True" in graded.report["output"], graded.report["output"][-2000:]
