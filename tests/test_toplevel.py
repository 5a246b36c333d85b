"""The learner's top level: cell by cell, as Run all; IPython forms as IPython answers them.

The runner and the stand-in kernel are tested here in-process, on small sources written for the
test; the catalog of real notebooks (tests/test_notebook_catalog.py) grades them for real.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.intake.submission import load_submission
from grader.learner import torchstate
from grader.learner.kernel import Kernel, NoInput, NotRunHere, SList, TimeitResult, install, no_input
from grader.learner.toplevel import TopLevel, TopLevelLimits, must_wait, quiet_lost_limits
from grader.wire.messages import Cell, Source, TopLevelEvent
from tests.conftest import ROOT, course_with, folder_with, solution_text
from tests.notebooks._snippets import EX5_LESSON
from tests.submissions.catalog import MODULES


class Recorder:
    def __init__(self) -> None:
        self.events: list[TopLevelEvent] = []
        self.modes_after_cells: list[torchstate.TorchModes | None] = []  # PyTorch's modes as each cell ended

    def __call__(self, event: TopLevelEvent) -> None:
        self.events.append(event)
        if event.event == "cell_end":
            self.modes_after_cells.append(torchstate.capture())

    def stops(self) -> list[tuple[str, str, int | None]]:
        return [(e.stop.label, e.stop.kind, e.stop.line) for e in self.events if e.stop is not None]

    def kept(self) -> dict[str, list[str]]:
        return {e.stop.label: list(e.stop.kept) for e in self.events if e.stop is not None and e.stop.kept}


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run a notebook's cells (texts) in this process; returns the module and what was heard."""
    import nbformat
    from nbformat import v4

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    opened: list[TopLevel] = []

    def go(cells: list[str], limits: TopLevelLimits | None = None) -> tuple[Any, Recorder]:
        path = tmp_path / "nb.ipynb"
        notebook = v4.new_notebook(cells=[v4.new_code_cell(c, execution_count=n) for n, c in enumerate(cells, 1)])
        path.write_text(nbformat.writes(notebook), encoding="utf-8")
        source = load_submission(path, {"ex1": "ex1_device"}).sources["ex1"]
        heard = Recorder()
        toplevel = TopLevel({"ex1": source}, str(tmp_path), limits or TopLevelLimits(), heard)
        opened.append(toplevel)
        return toplevel.module(source.module), heard

    install(Kernel())
    yield go
    for toplevel in opened:
        toplevel.close()


def test_a_failing_cell_stops_there_and_the_next_cell_runs(run: Any) -> None:
    module, heard = run([
        "import torch\nprint(torch.cuda.get_device_name(0))\ndef pick_device():\n    return torch.device('cpu')",
        "import matplotlib_is_not_here\nSMALL_N_ANSWER = 'B'\nx = compute()\ndef later():\n    return 2",
        "def broken(:\n    pass",
        "raise SystemExit(0)",
        "raise KeyboardInterrupt",
        "name = input('Họ tên: ')",
        "y = 1 / 0",
        "def pick_device():\n    return 'redefined'",  # the last definition wins
    ])
    assert heard.stops() == [("In [1]", "no_gpu", 2), ("In [2]", "missing_module", 1), ("In [3]", "syntax_error", 1),
                             ("In [4]", "exit", 1), ("In [5]", "exit", 1), ("In [6]", "input", 1),
                             ("In [7]", "error", 1)]
    # Definitions after the stop in the same cell are still made; `x = compute()` is not a definition.
    assert heard.kept() == {"In [1]": ["pick_device"], "In [2]": ["SMALL_N_ANSWER", "later"]}
    assert module.SMALL_N_ANSWER == "B" and module.later() == 2 and not hasattr(module, "x")
    assert module.pick_device() == "redefined"
    assert [e.event for e in heard.events].count("cell_start") == 7  # the one that does not compile never starts


def test_a_cell_past_its_limit_is_stopped_and_the_budget_then_allows_definitions_only(run: Any) -> None:
    limits = TopLevelLimits(cell_timeout_s=0.5, budget_s=0.8)
    started = time.monotonic()
    module, heard = run(["while True:\n    pass", "import time\ntime.sleep(5)",
                         "print('never')\ndef defined_anyway():\n    return 3"], limits)
    assert time.monotonic() - started < 3
    assert [(label, kind) for label, kind, _ in heard.stops()] == [("In [1]", "timeout"), ("In [2]", "timeout"),
                                                                   ("In [3]", "budget")]
    assert module.defined_anyway() == 3


def test_cells_an_earlier_process_ran_print_nowhere_even_with_no_descriptor_left(
        run: Any, capfd: pytest.CaptureFixture[str]) -> None:
    """A learner process that replaces one runs the cells an earlier one ran without printing them
    (``TopLevelLimits.shown``): into /dev/null, or, where the learner's code used up its descriptors so
    that /dev/null cannot be opened, into a stream that keeps nothing — never an error of the cell's."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cells = ["print('first run only')",
             "import resource\n_, most = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
             "resource.setrlimit(resource.RLIMIT_NOFILE, (0, most))",  # no descriptor left: /dev/null cannot open
             "print('first run only, again')",
             "print('a cell no run printed')"]
    shown = frozenset({("submission", 0), ("submission", 1), ("submission", 2)})  # the notebook's module
    try:
        _, heard = run(cells, TopLevelLimits(shown=shown))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert heard.stops() == []
    printed = capfd.readouterr()
    assert "first run only" not in printed.out + printed.err, printed
    assert "a cell no run printed" in printed.out


def test_except_exception_does_not_swallow_the_limit(run: Any) -> None:
    _, heard = run(["try:\n    while True:\n        pass\nexcept Exception:\n    pass"],
                   TopLevelLimits(cell_timeout_s=0.3))
    assert [kind for _, kind, _ in heard.stops()] == ["timeout"]


@pytest.mark.parametrize("dies", [
    # a weak reference calls back as its object dies (the grader's meter notes each storage so: a fill
    # loop that rebinds its chunk spends much of its time there, and once lost its limit there)
    "class Box:\n    pass\n\n\ndef back(_):\n    spin(0.45)\n\n\nbox = Box()\nref = weakref.ref(box, back)\n",
    "class Box:\n    def __del__(self):\n        spin(0.45)\n\n\nbox = Box()\n",
], ids=["weakref_callback", "__del__"])
def test_a_limit_that_lands_where_python_discards_exceptions_still_stops_the_cell(
        run: Any, dies: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Python reports an exception raised in a weakref callback or a ``__del__`` ("Exception ignored
    in ...") and goes on: a limit landing there was lost, and the code ran on past it until the judge's
    backstop (a fill loop said "timeout" instead of "still allocating" on a busy machine). The limit
    comes again until the code it limits has stopped. Here the 0.3 s limit lands in the dying object's
    code, which runs until 0.45 s, and the cell's own loop would run until 5 s. What Python discarded is the
    grader's: nothing of it is printed (pytest would also fail the test on it)."""
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # put back after the test
    quiet_lost_limits()  # as the learner process does
    cell = ("import time, weakref\n\nstart = time.perf_counter()\n\n\ndef spin(until):\n"
            "    while time.perf_counter() - start < until:\n        pass\n\n\n" + dies + "del box\nspin(5)\n")
    started = time.monotonic()
    _, heard = run([cell], TopLevelLimits(cell_timeout_s=0.3))
    assert [kind for _, kind, _ in heard.stops()] == ["timeout"]
    assert time.monotonic() - started < 2.5
    printed = capfd.readouterr()
    assert "TimeUp" not in printed.out + printed.err, printed


TRAIN_FOREVER = (
    "while True:\n"
    "    train_steps(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3)), torch.randn(256, 20),\n"
    "                torch.randint(0, 3, (256,)), torch.device('cpu'), steps=2, amp_dtype={dtype})"
)


def test_a_cell_stopped_inside_pytorch_leaves_pytorch_s_modes_as_they_were(run: Any) -> None:
    """The limit's SIGALRM lands anywhere in the learner's training loop, also between a PyTorch
    context manager's "set" and its "try" (Optimizer.step's grad switch, autocast's enter and exit).
    Without the restore, a run of 60 such stops of the solution's loop left a mode changed within
    its first 30-50 stops in each of three tries (grad off, so the next cell's backward raised; autocast
    nested; the CPU autocast dtype at float32); with it, in none of six."""
    import torch

    warm: dict[str, Any] = {}  # PyTorch's lazy imports (sympy) done first: a stop inside an import is not the point
    exec(solution_text("ex5") + "\n" + TRAIN_FOREVER.replace("while True", "for _ in range(3)").format(  # noqa: S102
        dtype="torch.float16"), warm)
    before = torchstate.capture()
    cells = [solution_text("ex5")] + [TRAIN_FOREVER.format(dtype=("None", "torch.float16", "torch.bfloat16")[i % 3])
                                      for i in range(60)]
    module, heard = run(cells, TopLevelLimits(cell_timeout_s=0.013, budget_s=60))
    assert [kind for _, kind, _ in heard.stops()] == ["timeout"] * 60
    assert before is not None and heard.modes_after_cells[1:] == [before] * 60
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


LEFT_ON_THE_STACK = """
import torch

class Kept(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

kept = Kept()
kept.__enter__()  # entered in the cell and never left, as a learner's cell may
"""


HELPER = "import torch\nscale = 2\n"
CALLED = (LEFT_ON_THE_STACK + "import helper\n\ndef f():\n    return helper.scale * int(torch.ones(1).sum())\n\n"
          "def hung():\n    pass\n")
# The products mode alone on the stack, and a torch function written in Python (F.relu) under it: torch.overrides'
# ``handle_torch_function`` takes the mode off the stack and puts it back around its ``__torch_function__``
# (``_pop_mode_temporarily``, a generator in contextlib's ``with``).
THROUGH_TORCH = "import torch\n\nfor _ in range(2):\n    torch.nn.functional.relu(torch.ones(2))\n"


class _Timers:
    """grader/learner/toplevel.py's ``signal`` module, but its timer never fires: the limit comes only where
    the test delivers it (a real SIGALRM would be handled inside the test's trace function, a frame between the
    grader's code and the handler that no learner process has)."""

    def __init__(self) -> None:
        self.seconds = 0.0  # what the grader last set the timer to

    def __getattr__(self, name: str) -> Any:
        import signal

        return getattr(signal, name)

    def setitimer(self, which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        self.seconds = seconds
        return (0.0, 0.0)


def _run_with_the_limit_at(instruction: int, way: str, workdir: str, timers: _Timers, called: str = CALLED,  # noqa: PLR0917
                           counted: Callable[[Any], bool] = lambda frame: True,
                           collect: bool = False) -> tuple[int, list[str], bool]:
    """Run a cell (a learner module importing another: a limit inside a limit) or a call of the learner's
    function, and deliver the limit at the ``instruction``-th instruction executed while a limit is armed, in
    any frame: the grader's, contextlib's, PyTorch's or the learner's. Returns how many instructions ran armed,
    what the grader left changed in the process, and whether the limit stopped the cell or the call. ``counted``:
    the frames whose instructions count (and take the limit), every frame by default; ``collect``: collect the
    young garbage before looking at the stacks, so that a generator the cut left suspended finishes first."""
    import signal

    import torch

    from grader.learner.calls import call

    def cell(module: str, text: str) -> Source:
        return Source(module, text, f"{module}.py", (Cell("In [1]", 1, text.count("\n")),))

    sources = {"ex1": cell("helper", HELPER), "ex2": cell("called", called)}
    quiet = frozenset({("helper", 0), ("called", 0)})  # the printing a restart silences: one more manager
    heard = Recorder()
    toplevel = TopLevel(sources, workdir, TopLevelLimits(cell_timeout_s=30, shown=quiet), heard)
    before = (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack(), sys.stdout, sys.stderr,
              sys.getprofile(), signal.getsignal(signal.SIGALRM))
    armed = 0

    def each_instruction(frame: Any, event: str, arg: Any) -> Any:
        nonlocal armed
        if event == "opcode" and toplevel._deadlines and counted(frame):
            armed += 1
            if armed == instruction:
                toplevel._deadlines[-1] = 0.0  # the limit is up here
                toplevel._on_alarm(signal.SIGALRM, frame)  # as the signal's handler runs: TimeUp, or it waits
        return each_instruction

    arming = {TopLevel._run_cell.__code__, call.__code__}

    def each_frame(frame: Any, event: str, arg: Any) -> Any:
        # Not inside an import the cell started (an importing frame's limit waits: the import rule, above),
        # nor in a frame begun with no limit armed, but the one that arms it.
        if not (toplevel._deadlines or frame.f_code in arming) or _in_an_import(frame, arming):
            return None
        frame.f_trace_opcodes = True
        return each_instruction

    stopped = False
    left: list[str] = []
    try:
        if way == "call":
            toplevel.module("called")
            toplevel.timed_out.add("called.hung")  # a call then runs under a profile hook (calls.py ``refusing``)
        sys.settrace(each_frame)
        if way == "call":
            stopped = call(toplevel, sources["ex2"], "f", lambda f: f(), 30.0).kind == "timed_out"
        else:
            toplevel.module("called")
    finally:
        sys.settrace(None)
        toplevel.close()
    if way == "cell":
        stopped = any(kind == "timeout" for _, kind, _ in heard.stops())
    if collect:
        gc.collect(1)  # (the young generations: a whole collection costs ~0.1 s here, at every instruction)
    above = torch.overrides._get_current_function_mode_stack()[before[0]:]
    if [type(mode).__name__ for mode in above] not in ([], ["Kept"]):
        left.append(f"modes {[type(mode).__name__ for mode in above]}")
    after = (before[0], torch._C._len_torch_dispatch_stack(), sys.stdout, sys.stderr,
             sys.getprofile(), signal.getsignal(signal.SIGALRM))
    left += [name for name, was, now in zip(("", "dispatch modes", "stdout", "stderr", "profile hook", "handler"),
                                           before, after, strict=True) if was is not now and was != now]
    if toplevel._deadlines or toplevel._armed_by:
        left.append("deadlines")
    if timers.seconds:
        left.append("timer")
    timers.seconds = 0.0  # as it was, for the next instruction
    signal.signal(signal.SIGALRM, before[5])
    while torch._C._len_torch_function_stack() > before[0]:
        torch.overrides._pop_mode()
    sys.stdout, sys.stderr = before[2], before[3]
    sys.setprofile(before[4])
    return armed, left, stopped


def _limit_at_every_instruction(way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                **options: Any) -> tuple[int, int, dict[str, list[int]]]:
    """``_run_with_the_limit_at`` (with ``options``) at each instruction in turn, until none is left: how many
    instructions ran armed, how many of the cuts stopped the cell or the call, and what each cut left changed
    in the process, with the instructions that left it."""
    from grader.learner import toplevel

    monkeypatch.chdir(tmp_path)
    timers = _Timers()
    monkeypatch.setattr(toplevel, "signal", timers)
    leaks: dict[str, list[int]] = {}
    stops = 0
    instruction = 1
    while True:
        armed, left, stopped = _run_with_the_limit_at(instruction, way, str(tmp_path), timers, **options)
        stops += stopped
        for what in left:
            leaks.setdefault(what, []).append(instruction)
        if instruction > armed:
            return armed, stops, leaks
        instruction += 1


def _in_an_import(frame: Any, arming: set[Any]) -> bool:
    """Whether an import runs between ``frame`` and a frame above it that arms a limit."""
    seen = False
    while frame is not None:
        if seen and frame.f_code in arming:
            return True
        seen = seen or frame.f_code.co_filename.startswith("<frozen importlib")
        frame = frame.f_back
    return False


@pytest.mark.parametrize("way", ["cell", "call"])
def test_a_limit_landing_at_any_instruction_leaves_the_grader_s_state_as_it_was(
        way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit's SIGALRM is handled between two instructions, wherever the process is. Landing in the
    grader's own code around the learner's, it left the grader's state changed for the rest of the process:
    between the cell's product mode's push and its ``with`` (the mode under every later check), inside its
    pop (a mode the learner's cell left above it lost), in contextlib's frames between a generator's
    ``yield`` and the ``with`` taking it (the cell's products mode again: seen once in ~12 runs of the suite's
    60 stops of a training loop, above; stdout still redirected; the alarm's deadline kept, so every later
    limit of the process at once). Here it lands at every instruction in turn, also ones CPython never
    handles a signal at (stricter than the interpreter): a cell importing another learner module, printing
    silenced, leaving a mode of its own on PyTorch's stack, and a call. The cut is where the learner's code
    runs, or it waits; the learner's own mode stays."""
    armed, stops, leaks = _limit_at_every_instruction(way, tmp_path, monkeypatch)
    assert armed > 200  # the cell's and the call's whole way in and out of the learner's code
    assert stops > 20  # where the learner's code runs, the limit stops it
    assert leaks == {}


def test_a_limit_landing_in_pytorch_s_own_pop_and_push_of_a_mode_leaves_the_stack_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch function written in Python (F.relu, F.cross_entropy ...) runs a mode's ``__torch_function__``
    inside ``with _pop_mode_temporarily()``: the mode is off the stack until the ``with`` ends. Cut between the
    pop and the ``with`` taking it, the generator was left suspended with the mode; the cell's own exit then
    found no products mode to take off, and the generator, when it died, pushed it back — under every later
    check (once in a fresh clone's suite: the 60 stops of a training loop, above, left it). Here the limit lands
    at every instruction of PyTorch's and contextlib's frames while the cell's products mode is the only one."""
    import contextlib

    import torch

    torch_python = {torch.overrides.__file__, contextlib.__file__}
    armed, stops, leaks = _limit_at_every_instruction(
        "cell", tmp_path, monkeypatch, called=THROUGH_TORCH,
        counted=lambda frame: frame.f_code.co_filename in torch_python, collect=True)
    assert armed > 50  # handle_torch_function's way in and out, twice
    assert stops > 10  # where the cut changes no stack, it stops the cell
    assert leaks == {}


def test_a_sigalrm_before_the_limit_does_not_stop_the_cell(run: Any) -> None:
    """Only the limit's own timer stops a cell: a SIGALRM handled before the deadline (one pending from an
    inner limit that has just ended, or sent by the learner's code) sets the timer again for the deadline.
    Before, it stopped the cell as if the limit had come ("timeout" after no time at all)."""
    module, heard = run(["import os, signal\nsignal.raise_signal(signal.SIGALRM)\nos.kill(os.getpid(), "
                         "signal.SIGALRM)\nreached = True"], TopLevelLimits(cell_timeout_s=30))
    assert heard.stops() == []
    assert module.reached


MATMUL_PRECISION_PROBE = """
import torch
from grader.learner import torchstate

fresh = torchstate.capture()
asks = {  # the ways a learner module asks for TF32 / reduced-precision float32 matmuls
    "set_float32_matmul_precision high": lambda: torch.set_float32_matmul_precision("high"),
    "set_float32_matmul_precision medium": lambda: torch.set_float32_matmul_precision("medium"),
    "cuda.matmul.allow_tf32": lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
    "cuda.matmul.fp32_precision": lambda: setattr(torch.backends.cuda.matmul, "fp32_precision", "tf32"),
    "backends.fp32_precision": lambda: setattr(torch.backends, "fp32_precision", "tf32"),
}
for name, ask in asks.items():
    ask()
    torchstate.restore(fresh)
    print(name, torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
          torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.allow_tf32)
asks["cuda.matmul.fp32_precision"]()
print("capture after the new API:", torchstate.capture().matmul_precision)
"""


def test_each_check_multiplies_in_full_float32_whatever_precision_the_learner_asked_for() -> None:
    """A learner module that asks for TF32 at its top (Lightning's advice) made an H200 fail a correct
    ex4 for "weights differ from a full-batch step" (8 of 100 points, with each of the three APIs;
    docs/gpu-validation.md): the judge's reference is FP32. The reset before each check puts the
    precision back; PyTorch's legacy and new (2.9) APIs mixed leave its legacy reads raising, so the
    restore must leave every read working after each way of asking, and capture() must survive a
    precision PyTorch refuses to say."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", MATMUL_PRECISION_PROBE], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 6, done.stdout
    for line in lines[:5]:
        assert line.endswith(" highest False ieee True"), line
    assert lines[5] == "capture after the new API: None"


def test_a_limit_that_lands_inside_an_import_waits_for_it(run: Any, tmp_path: Path) -> None:
    """A package cut halfway through its import stays broken in the process: its finished submodules
    stay in sys.modules, orphaned, and the next import of the package never sets them as its
    attributes ("module 'sympy' has no attribute 'core'" after the first optimizer.step() was cut).
    So the cell's limit waits for the import, then cuts the cell; the next cell uses the package."""
    package = tmp_path / "slowpkg"
    package.mkdir()
    (package / "__init__.py").write_text("import slowpkg.fast\nimport slowpkg.slow\n", encoding="utf-8")
    (package / "fast.py").write_text("VALUE = 42\n", encoding="utf-8")
    (package / "slow.py").write_text(  # slow the first time only, as a cold import is
        "import os, time\nif not os.path.exists('imported_once'):\n    open('imported_once', 'w').close()\n"
        "    time.sleep(0.6)\n", encoding="utf-8")
    module, heard = run(["import slowpkg\nwhile True:\n    pass", "import slowpkg.fast\nvalue = slowpkg.fast.VALUE"],
                        TopLevelLimits(cell_timeout_s=0.3))
    # Cut after the import: in the loop, or on the import's own line when the retried alarm came in
    # the import's last C steps and Python handled it only back in the cell's frame (seen once in the
    # suite on the busy machine); never inside the package, which the next cell finds whole.
    [(cell, kind, line)] = heard.stops()
    assert (cell, kind) == ("In [1]", "timeout") and line in (1, 2), heard.stops()
    assert module.value == 42


def test_a_limit_landing_in_the_graders_own_code_inside_an_import_waits_for_it(run: Any, tmp_path: Path) -> None:
    """An import runs the grader's code inside it: the top level's ``find_spec`` for every module
    (sympy has hundreds), a stand-in's or the meter's torch mode for every op a module body runs.
    A limit landing there is still inside the import. Before, the walk stopped at the first grader
    frame and cut the import: on a busy machine a correct notebook scored 70/100 ("module 'sympy'
    has no attribute 'core'"). Here the slow submodule spends its time in the grader's code."""
    package = tmp_path / "gradercalls"
    package.mkdir()
    (package / "__init__.py").write_text("import gradercalls.fast\nimport gradercalls.slow\n", encoding="utf-8")
    (package / "fast.py").write_text("VALUE = 7\n", encoding="utf-8")
    (package / "slow.py").write_text(
        "import os, time\nfrom grader.wire.codec import encode_plain\n"
        "if not os.path.exists('imported_once'):\n    open('imported_once', 'w').close()\n"
        "    started = time.monotonic()\n    while time.monotonic() - started < 0.6:\n"
        "        encode_plain([[i, (i, str(i))] for i in range(200)])\n", encoding="utf-8")
    module, heard = run(["import gradercalls\nwhile True:\n    pass",
                         "import gradercalls.fast\nvalue = gradercalls.fast.VALUE"], TopLevelLimits(cell_timeout_s=0.3))
    assert heard.stops() == [("In [1]", "timeout", 2)]  # cut after the import, in the loop
    assert module.value == 7


def _frames(*filenames: str) -> list[Any]:
    """A chain of stand-in frames, innermost first (only what must_wait() reads)."""
    frames: list[Any] = []
    for name in reversed(filenames):
        frames.insert(0, type("Frame", (), {"f_code": type("Code", (), {"co_filename": name})(),
                                            "f_back": frames[0] if frames else None})())
    return frames


def test_the_import_rule_walks_up_to_the_frame_that_armed_the_limit() -> None:
    grader = str(Path(__file__).resolve().parent.parent / "grader" / "learner" / "toplevel.py")
    importlib_frame = "<frozen importlib._bootstrap>"
    # A limit landing in the grader's find_spec, inside an import the learner's cell started.
    inner = _frames(grader, importlib_frame, "/learner/bai.py", grader, importlib_frame)
    assert must_wait(inner[0], inner[3])
    # A limit landing in the learner's loop: the import above the frame that armed it (the learner's
    # own module, which the top level runs as an import) does not count.
    loop = _frames("/learner/bai.py", grader, importlib_frame)
    assert not must_wait(loop[0], loop[1])
    assert not must_wait(None, None)


def test_what_a_cell_grabbed_before_running_out_of_memory_is_dropped(run: Any) -> None:
    module, heard = run(["kept = 1", "kept = 2\nhuge = [0] * 10\nraise MemoryError('simulated')"])
    assert [kind for _, kind, _ in heard.stops()] == ["memory"]
    assert module.kept == 1 and not hasattr(module, "huge")


def test_ipython_forms_get_ipython_values(run: Any, tmp_path: Path) -> None:
    module, heard = run([
        "files = !ls\nn = len(files)\nfirst = files.s",
        "t = %timeit -o -n 2 -r 3 sum(range(10))\nbest = t.best",
        "%env GRADER_TEST_VAR=42\nvalue = %env GRADER_TEST_VAR",
        "%%writefile helper_module.py\ndef helper():\n    return 'from helper'",
        "import helper_module\nfrom_helper = helper_module.helper()",
        "%%capture out\n!echo shell\nprint('hidden')",
        "%matplotlib inline\n%load_ext autoreload\n%autoreload 2\nlen?",
        "!pip install -q torchinfo\n%pip install x",
        "%%time\ndef timed():\n    return 5",
        "x = %time 2 + 3",
        "%bookmark here",
    ])
    assert heard.stops() == [("In [11]", "ipython", 1)]  # the one form the grader does not run
    assert isinstance(module.files, SList) and module.files == ["nb.ipynb"] and module.n == 1  # ls ran, in the cwd
    assert isinstance(module.t, TimeitResult) and module.t.loops == 2 and module.t.repeat == 3
    assert 0 < module.best <= module.t.average
    assert module.value == "42" and os.environ.pop("GRADER_TEST_VAR") == "42"
    assert module.from_helper == "from helper"
    assert module.out.stdout == "shell\nhidden\n"  # the body's IPython syntax runs too, and is captured
    assert module.timed() == 5 and module.x == 5


def test_kernel_pieces() -> None:
    lines = SList(["a.py 10", "b.txt 20", "c.py 30"])
    assert lines.grep(r"\.py$", field=0) == ["a.py 10", "c.py 30"]
    assert lines.fields(1) == ["10", "20", "30"] and lines.n == "a.py 10\nb.txt 20\nc.py 30"
    result = TimeitResult(loops=10, repeat=3, all_runs=[0.1, 0.2, 0.3])
    assert result.best == pytest.approx(0.01) and result.worst == pytest.approx(0.03)
    assert "per loop (mean ± std. dev. of 3 runs, 10 loops each)" in str(result)
    with pytest.raises(NoInput):
        no_input("? ")
    with pytest.raises(NotRunHere):
        Kernel().run_line_magic("bookmark", "x")


def test_the_top_level_runs_once_per_grading_and_finds_a_notebook_s_process_there(
        tmp_path: Path, batch_one: Any, grade: Any) -> None:
    """``grader.check()`` does nothing there; the real IPython, imported by the learner's code (not by the
    grader: an exec'd learner process patches it as it is imported, after any probe of what is installed),
    gives the stand-in kernel; and Python's
    collector is on (the grader's processes turn it off through their own imports only)."""
    text = "\n\n".join(solution_text(ex) for ex in MODULES) + (
        "\n\nprint('TOP LEVEL RAN')\nimport grader\ngrader.check()\n"
        "import importlib.util\nprint('FOUND', importlib.util.find_spec('IPython') is not None)\n"  # as libraries probe
        "from IPython import get_ipython as real_get_ipython\n"
        "print('KERNEL', type(real_get_ipython()).__name__, real_get_ipython().getoutput('echo hi'))\n"
        "import gc\nprint('COLLECTOR', gc.isenabled())\n")
    learner = tmp_path / "class" / "once"  # a folder holding one file serves every exercise
    learner.mkdir(parents=True)
    (learner / "bai_lam.py").write_text(text, encoding="utf-8")
    for graded in (grade(learner), batch_one(learner)):  # an exec'd child, then a forked one
        assert graded.report is not None and graded.report["score"] == 100.0, graded.stderr
        output = graded.report["output"]
        assert output.count("TOP LEVEL RAN") == 1  # five exercises, one file, one top level
        assert "FOUND True\nKERNEL Kernel ['hi']" in output and "COLLECTOR True" in output, output
        assert "Self-check" not in output and "Tự kiểm tra" not in output
        assert graded.report["top_level"] == []


# ex2 with its clock and its synchronize in a module of their own beside it, the names bound at import.
TIMING_WITH_A_HELPER = """import torch
from common import now, sync


def time_matmul(n, device, repeats=5):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    sync(device)
    start = now()
    for _ in range(repeats):
        a @ b
    sync(device)
    return (now() - start) / repeats


def speedup(n, device, repeats=3):
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)


SMALL_N_ANSWER = "B"
"""
SYNCS = """from time import perf_counter as now

import torch


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
"""
NEVER_SYNCS = "from time import perf_counter as now\n\n\ndef sync(device):\n    pass\n"


def test_an_exercise_imports_a_module_of_its_folder(tmp_path: Path, grade_forked: Any) -> None:
    """A folder's ``common.py`` imported by its ``ex2_timing.py``, as the learner's own folder runs it: graded
    without it, every check of ex2 was the NameError of a missing module ("imports `common`, which the
    grading machine does not have": 3 of 20). The checks see through it: its clock, bound by name in the
    helper, reads the stand-in's virtual time, and a helper that never synchronizes loses that check."""
    graded = {name: grade_forked(folder_with(tmp_path, name, {"ex2_timing": TIMING_WITH_A_HELPER, "common": helper}))
              for name, helper in (("syncs", SYNCS), ("never_syncs", NEVER_SYNCS))}
    for run in graded.values():
        assert run.code == 0 and run.report is not None, run.stderr
        assert run.report["top_level"] == [], run.report["top_level"]
    assert graded["syncs"].lost("ex2") == set()
    lost = graded["never_syncs"].lost("ex2")
    assert "ex2.synchronizes_before_reading_clock" in lost and "ex2.warms_up" not in lost, lost


def test_definitions_after_a_demo_line_still_count(tmp_path: Path, grade_forked: Any) -> None:
    ex1 = "import torch\nprint(torch.cuda.get_device_name(0))\n" + solution_text("ex1")
    graded = grade_forked(folder_with(tmp_path, "demo_first", {"ex1_device": ex1}))
    assert graded.code == 0 and graded.report is not None, graded.stderr
    assert [(s["where"], s["kind"]) for s in graded.report["top_level"]] == [("ex1_device.py, line 2", "no_gpu")]
    assert "ex1_device.py, line 2 needs a GPU" in graded.report["top_level"][0]["message"]
    assert graded.report["score"] == 20.0


def test_a_demo_cell_cut_inside_pytorch_costs_the_training_function_nothing(tmp_path: Path, grade_forked: Any) -> None:
    """End to end, in every learner process of a grading: the cell below is what an `Optimizer.step`
    and an autocast `__enter__` leave when the cell limit lands between their "set" and their "try"
    (grad off, autocast on and nested), then the rest of a long demo. The grader stops the cell and
    puts PyTorch's modes back, so ex5's checks train as from a fresh process."""
    demo = ("\n\nimport time\ntorch.set_grad_enabled(False)\ntorch.set_autocast_enabled('cpu', True)\n"
            "torch.autocast_increment_nesting()\nwhile True:\n    time.sleep(0.05)\n")
    lesson_style = "import torch\nfrom torch import nn\n" + EX5_LESSON  # FP32 runs outside any autocast block
    folder = folder_with(tmp_path, "cut_demo", {"ex5_amp": lesson_style + demo})
    course = course_with(tmp_path, {"cell_timeout_s: 10": "cell_timeout_s: 1"})
    graded = grade_forked(folder, "--course", str(course))
    report = graded.report
    assert graded.code == 0 and report is not None, graded.stderr
    assert [stop["kind"] for stop in report["top_level"]] == ["timeout"]
    ex5 = report["exercises"]["ex5"]
    assert ex5["score"] == ex5["max_score"] == 20.0, [(c["id"], c["status"], c["message"]) for c in ex5["checks"]]


def test_a_cell_its_process_cannot_stop_ends_that_process_and_the_report_prints_each_cell_once(
        tmp_path: Path, grade_forked: Any) -> None:
    """A cell the learner process cannot stop itself (stuck in C code, as the lesson's 10000 x 10000 matmul
    on a CPU; here the alarm ignored) ends with its process, at its limit and a grace. The next process
    skips it and runs the other cells again without printing what the first one printed: the report's
    output reads as one "Run all", the cells after the stuck one print once too."""
    code = ("# %%\nprint('printed by the first cell')\n\n"
            "# %%\nimport signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(120)\n\n"
            "# %%\nprint('printed after the stuck cell')\n\n# %%\n" + solution_text("ex1"))
    course = course_with(tmp_path, {"cell_timeout_s: 10": "cell_timeout_s: 1"})
    graded = grade_forked(folder_with(tmp_path, "stuck_cell", {"ex1_device": code}), "--course", str(course))
    report = graded.report
    assert graded.code == 0 and report is not None, graded.stderr
    assert [stop["kind"] for stop in report["top_level"]] == ["timeout"], report["top_level"]
    assert report["exercises"]["ex1"]["status"] == "passed"
    output = report["output"]
    assert output.count("printed by the first cell") == 1, output
    assert output.count("printed after the stuck cell") == 1, output


def test_a_wall_clock_that_runs_out_in_an_endless_top_level_leaves_what_it_never_named_not_attempted(
        tmp_path: Path, grade_forked: Any) -> None:
    """The run's wall clock (here 2 s, shorter than the cell's own 10 s limit) runs out while the
    top level still loops: what the load of a busy machine did to a 30 s clock in CI. An exercise
    whose file never names its functions could only be "not attempted", whatever the clock: it says
    so. One whose file names them (defined after the loop) was cut by the clock: a timeout."""
    endless = "while True:\n    pass\n"
    folder = folder_with(tmp_path, "endless", {"ex1_device": endless,
                                               "ex3_roundtrip": endless + solution_text("ex3")})
    course = course_with(tmp_path, {"run_timeout_s: 300": "run_timeout_s: 2"})
    graded = grade_forked(folder, "--course", str(course))
    report = graded.report
    assert graded.code == 0 and report is not None, graded.stderr
    ex1, ex3 = report["exercises"]["ex1"], report["exercises"]["ex3"]
    assert ex1["status"] == "not_attempted" and {c["status"] for c in ex1["checks"]} == {"not_attempted"}, ex1
    assert "pick_device, describe_device" in ex1["checks"][0]["message"]
    assert {c["status"] for c in ex3["checks"]} == {"timeout"}, ex3
    assert "wall_clock_limit" in report["notes"]


HANGS_BEHIND_NAMES = '''
import functools

def logged(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper

@logged
def time_matmul(n):
    while True:
        pass

timer = time_matmul

def speedup(n):
    try:
        return timer(n) / 2
    except Exception:
        return 1.0

@logged
def unrelated(n):
    return n + 1
'''


def test_a_function_that_ran_past_its_limit_is_refused_wherever_it_is_called_from(tmp_path: Path) -> None:
    """After time_matmul ran past its limit, speedup's call of it (through an alias, under a decorator,
    inside `except Exception`) is answered at once as time_matmul's, not waited for again; a function
    behind the same decorator still runs, and nothing is refused once the call is over."""
    from grader.learner.calls import call

    (tmp_path / "ex2.py").write_text(HANGS_BEHIND_NAMES, encoding="utf-8")
    source = load_submission(tmp_path / "ex2.py", {"ex2": "ex2_timing"}).sources["ex2"]
    toplevel = TopLevel({"ex2": source}, str(tmp_path), TopLevelLimits(), lambda event: None)
    try:
        assert call(toplevel, source, "time_matmul", lambda f: f(8), 0.3).kind == "timed_out"
        # Refused, not waited for: a wait would end at the 5 s limit as speedup's own "timed_out".
        outcome = call(toplevel, source, "speedup", lambda f: f(8), 5.0)
        assert (outcome.kind, outcome.hung) == ("already_timed_out", f"{source.module}.time_matmul")
        assert call(toplevel, source, "unrelated", lambda f: f(8), 5.0).value == 9
        assert call(toplevel, source, "time_matmul", lambda f: f(8), 5.0).kind == "already_timed_out"
    finally:
        toplevel.close()
    assert sys.getprofile() is None


ARGUMENTS = '''import argparse
import torch

parser = argparse.ArgumentParser(description="PyTorch's device-agnostic example")
parser.add_argument("--disable-cuda", action="store_true", help="Disable CUDA")
args = parser.parse_args()
args.device = torch.device("cuda") if not args.disable_cuda and torch.cuda.is_available() else torch.device("cpu")
'''


def test_a_script_s_argument_parser_reads_its_own_command_line(tmp_path: Path, grade_forked: Any, run: Any) -> None:
    """``args = parser.parse_args()`` at a script's top (PyTorch's CUDA semantics notes, "device-agnostic code")
    reads ``python ex1_device.py``'s command line: no argument, the defaults. It read the grader's fork server's
    ("unrecognized arguments: learner 14 isolated 256") and stopped, and every function reading ``args`` failed:
    9 of ex1's 20 points. In a notebook it stops on the kernel's ``-f``, as in Jupyter; ``parse_known_args()``
    works there."""
    ex1 = ARGUMENTS + "\n\ndef pick_device():\n    return args.device if args.device.type == 'cuda' else (\n" \
        "        torch.device('mps') if torch.backends.mps.is_available() else torch.device('cpu'))\n\n" \
        + solution_text("ex1").split("def describe_device", 1)[0].split("import torch", 1)[0] \
        + "def describe_device" + solution_text("ex1").split("def describe_device", 1)[1]
    graded = grade_forked(folder_with(tmp_path / "class", "script", {"ex1_device": ex1}))
    assert graded.code == 0 and graded.report is not None, graded.stderr
    assert graded.report["top_level"] == [], graded.report["top_level"]
    assert graded.lost("ex1") == set(), graded.exercise("ex1")["checks"]

    module, heard = run([ARGUMENTS, "known, _ = parser.parse_known_args()\nimport sys\nargv = list(sys.argv)"])
    assert [(label, kind) for label, kind, _ in heard.stops()] == [("In [1]", "exit")]  # SystemExit(2), as Jupyter
    assert module.known.disable_cuda is False and module.argv[0].endswith("ipykernel_launcher.py")


# A line Colab's Python 3.12 runs (PEP 701: the f-string's own quotes inside it) and older ones do not compile;
# on 3.12 and later, a line no Python compiles stands for it.
NEWER_PYTHON_LINE = 'print(f"Device: {info["type"]} — {info["name"]}")' if sys.version_info < (3, 12) \
    else 'print(f"Device: {info[}")'


def test_a_statement_that_does_not_compile_here_costs_only_itself(run: Any) -> None:
    """A cell that ran in the learner's notebook on a newer Python, its functions beside a demo line this Python
    does not compile: the statements before that line run, the definitions after it are made, and a function
    whose own body does not compile is the only one lost. It cost the whole cell (0 of ex1's 20 points)."""
    module, heard = run([
        "import torch",
        "def pick_device():\n    return torch.device('cpu')\n\n"
        "info = {'type': 'cpu', 'name': 'x86_64'}\n"
        f"{NEWER_PYTHON_LINE}\n"
        "def describe_device(device):\n    return dict(info)\n\n"
        "def broken():\n    return " + NEWER_PYTHON_LINE.removeprefix("print") + "\n\n"
        "@staticmethod\ndef decorated():\n    return 1\n"
        "LATER = describe_device(None)\n",
        "def fine():\n    return 2",
    ])
    assert module.pick_device().type == "cpu" and module.info["name"] == "x86_64"  # before the line: ran
    assert module.describe_device(None) == module.info  # after it: defined
    assert not hasattr(module, "broken") and not hasattr(module, "LATER")  # its own body; not a definition
    assert callable(module.decorated) and module.fine() == 2
    stops = heard.stops()
    assert [(label, kind, line) for label, kind, line in stops] == [("In [2]", "syntax_error", 5)]
    assert heard.kept() == {"In [2]": ["describe_device", "decorated"]}
    stop = next(e.stop for e in heard.events if e.stop is not None)
    assert stop.error.startswith("SyntaxError: ")


def test_a_colab_notebook_on_a_newer_python_keeps_its_functions(tmp_path: Path, grade_forked: Any) -> None:
    """End to end: ex1's functions and the demo line Colab's Python runs, in one cell."""
    import nbformat
    from nbformat import v4

    cells = ["import torch", solution_text("ex1") + "\n\ninfo = describe_device(pick_device())\n" + NEWER_PYTHON_LINE]
    notebook = v4.new_notebook(cells=[v4.new_code_cell(c, execution_count=n) for n, c in enumerate(cells, 1)])
    path = tmp_path / "colab.ipynb"
    path.write_text(nbformat.writes(notebook), encoding="utf-8")
    graded = grade_forked(path)
    assert graded.code == 0 and graded.report is not None, graded.stderr
    assert graded.exercise("ex1")["status"] == "passed", graded.exercise("ex1")["checks"]
    assert [s["kind"] for s in graded.report["top_level"]] == ["syntax_error"]
    message = graded.report["top_level"][0]["message"]
    assert "made only the definitions after it" in message
    assert f"Python {sys.version_info.major}.{sys.version_info.minor} (" in message
