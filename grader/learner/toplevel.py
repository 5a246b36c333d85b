"""Run the learner's top level as Jupyter's "Run all" does, once per process, never fatally.

Inside the sandbox, each learner module (a notebook, a `.py`, each file of a folder) runs cell
by cell (grader/intake/submission.py cuts the cells), in order, in one namespace. A cell that raises
(SystemExit and KeyboardInterrupt included), does not compile, calls `input()`, uses an IPython
form the grader does not run, or runs past its time limit stops there and is recorded as a
`CellStop`; the definitions later in that cell (`def`, `class`, `import`, `NAME = constant`)
are still made, and the next cell runs. So a demo cell that needs a GPU, a plot that needs
matplotlib or a forgotten scratch cell never costs the functions their grade.

Two limits (course.yaml `limits`): each cell gets `cell_timeout_s`, the whole top level
`top_level_timeout_s`; past the latter, cells only make their definitions. A cell stuck in C
code (one huge matmul) cannot be interrupted here: the parent kills the process at the cell's
deadline, records it, and the next process skips that cell (``skip``) and runs the cells an earlier
process ran without printing them again (``shown``). A limit that lands inside
an import waits until the import is done (the parent's deadline still bounds it): a package cut
halfway stays broken for the whole process. Measured when the first `optimizer.step()` of a
process imported torch._dynamo and sympy (~1 s on 2 idle cores, several under load; now only code
that compiles does, grader/learner/deferred.py): cut there, every later training step raised
"partially initialized module 'torch._dynamo'…" or "module 'sympy' has no attribute 'core'":
colab_keepalive_oom.ipynb, whose first training is a demo cell, scored 70/100 at a 0.3 s cell limit
(ex5 and ex4's training checks `error`), as it once did in CI at 5 s under load.

The listener hears every step (a protocol TopLevelEvent), so the grader knows which cell is
running: ``importing`` and ``imported`` (a module), ``cell_start``, ``cell_stop`` (with its
CellStop), ``cell_end``, and ``cell_kept`` (what a skipped cell still defined).
"""

from __future__ import annotations

import ast
import contextlib
import gc
import importlib.abc
import importlib.machinery
import importlib.util
import io
import linecache
import math
import os
import re
import resource
import signal
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from grader.learner import torchstate
from grader.learner.kernel import NoInput, NotRunHere
from grader.learner.longcalls import UNCUT, OutlastsCell, PartedProducts
from grader.learner.onmachine import Asked, MachineStatement, names_of
from grader.reference.device import FILE_LIMIT_SIGNS, MEMORY_SIGNS
from grader.reference.modes import TORCH_STACK_CODE, TORCH_STACK_GENERATORS
from grader.wire.messages import Cell, CellStop, Source, StopKind, TopLevelEvent

# The real clock, taken before any session replaces time.monotonic: this process's own deadlines
# (each learner call runs under ``alarm``) are never read as the learner's clock reads, nor on a
# stand-in's virtual timeline.
_monotonic = time.monotonic

# What PyTorch says when the code wants a GPU the machine does not have (lower case).
NO_GPU_SIGNS = ("not compiled with cuda", "no nvidia driver", "no cuda gpus", "cuda driver", "cuda runtime",
                "cuda error", "cuda-capable device", "cuda is not available", "torch.cuda.is_available() is false",
                "not compiled with mps", "mps backend", "mps is not available", "invalid device ordinal", "nvml")
DEFINITIONS_ALLOWANCE_S = 5.0  # for the definitions of a cell that stopped (an import can be slow)
# A limit that lands inside an import, or in the grader's own code around the learner's (``must_wait``), waits
# for it: the alarm comes back this often until it is done. And once it has cut, it comes back as often until the
# limit's ``with`` has ended (``TopLevel._on_alarm``).
RETRY_S = 0.05
Listener = Callable[[TopLevelEvent], None]


@dataclass(frozen=True)
class TopLevelLimits:
    cell_timeout_s: float = 10.0
    budget_s: float = 60.0  # what is left of top_level_timeout_s
    skip: frozenset[tuple[str, int]] = frozenset()  # cells an earlier process could not finish
    # Cells an earlier process ran: what they print is in the report already, so they run again without
    # printing (a notebook's output reads as one "Run all", not its first cells twice after a restart).
    shown: frozenset[tuple[str, int]] = frozenset()
    run: frozenset[str] | None = None  # the modules ``run_all`` runs (None: all); the others when imported


class TimeUp(BaseException):
    """A cell's (or a call's) time is up (SIGALRM). Not an Exception: `except Exception` in the
    learner's code lets it through."""


def one_line(exc: BaseException, limit: int = 200) -> str:
    if isinstance(exc, SyntaxError):
        text = f"SyntaxError: {exc.msg}" + (f": {exc.text.strip()}" if exc.text and exc.text.strip() else "")
    else:
        message = str(exc).strip().splitlines()
        text = type(exc).__name__ + (f": {message[0]}" if message else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


FILES_LOOKED_AT = 2000  # files_full walks no further: a learner's code that made more files is not asked about


@dataclass(frozen=True)
class FilesBefore:
    """The learner's files before a call or a cell, as ``files_full`` compares them after: the work dir's
    free blocks, and, when they were none (an earlier cell or call had filled it), each entry's path, inode
    and change time — a write into a full work dir frees and takes no block, but it creates or truncates a
    file (torch.save saving a checkpoint after a demo cell filled the files)."""

    free: int | None
    entries: frozenset[tuple[str, int, int]] = frozenset()


def free_blocks(workdir: str) -> int | None:
    """The free blocks of the work dir's filesystem."""
    try:
        return os.statvfs(workdir).f_bavail
    except OSError:
        return None


def files_before(workdir: str) -> FilesBefore:
    """What ``files_full`` compares with, taken before each call and each cell."""
    free = free_blocks(workdir)
    return FilesBefore(free, _stamps(workdir) if free == 0 else frozenset())


def _stamps(workdir: str) -> frozenset[tuple[str, int, int]]:
    """Each entry of the work dir as (path, inode, change time): what a write into a full dir changes."""
    return frozenset(stamp for entry in _entries(workdir) if (stamp := _stamp(entry)))


def _stamp(entry: os.DirEntry[str]) -> tuple[str, int, int] | None:
    try:
        return entry.path, entry.inode(), entry.stat(follow_symlinks=False).st_ctime_ns
    except OSError:  # gone since it was listed
        return None


def _entries(workdir: str) -> Iterator[os.DirEntry[str]]:
    """The work dir's entries, folder by folder, never a whole folder listed at once (a folder of a million
    files is the learner's to make), never through a link, and no more than FILES_LOOKED_AT of them."""
    looked = 0
    folders = [workdir]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    looked += 1
                    if looked > FILES_LOOKED_AT:
                        return
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                    yield entry
        except OSError:
            continue


def files_full(workdir: str, before: FilesBefore) -> bool:
    """Whether the learner's code, which raised, had just filled its files to the submission's size
    limit: it wrote during the call (the work dir's free blocks changed, or, in a work dir already full,
    a file was made or written: ``FilesBefore``), and then the work dir's filesystem is full (in a sandbox
    a tmpfs as large as the limit: grader/run/isolation.py) or a file is as large as the file-size limit.
    What a writer says then is its own (Python's "[Errno 28] No space left on device", torch.save's
    "unexpected pos 704 vs 598", numpy's "2000000 requested and 1310720 written"), so the judge asks this
    rather than read the message (grader/judge/plugin.py ``classify``). Files filled by an earlier call
    are not this call's cause: a check whose call only raised, after another filled the work dir, keeps
    its own message. A cell of the top level is asked the same (``file_size``), a learner call by
    grader/learner/calls.py."""
    free = free_blocks(workdir)
    if free is None or before.free is None:
        return False
    if free == before.free and (free != 0 or _stamps(workdir) == before.entries):
        return False
    if free == 0:
        return True
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit == resource.RLIM_INFINITY:
        return False
    return any(_size(entry) >= limit for entry in _entries(workdir))


def _size(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_size if entry.is_file(follow_symlinks=False) else -1
    except OSError:  # gone since it was listed
        return -1


@contextlib.contextmanager
def _unprinted(quiet: bool) -> Iterator[None]:
    """Where a cell an earlier learner process ran prints (``TopLevelLimits.shown``): /dev/null, a file as
    a cell's code may expect (``sys.stdout.fileno()``), or, where that code left no descriptor to open it
    (it ran out of them the first time too), a stream that keeps nothing: never an error of the cell's."""
    if not quiet:
        yield
        return
    try:
        sink: IO[str] = open(os.devnull, "w", encoding="utf-8")
    except OSError:
        sink = io.TextIOWrapper(io.BufferedWriter(_Nowhere()), encoding="utf-8")
    with sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


class _Nowhere(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return memoryview(data).nbytes


def classify(exc: BaseException) -> StopKind:
    """Why a cell stopped, in the words the report explains."""
    if isinstance(exc, (TimeUp, OutlastsCell)):
        return "timeout"
    if isinstance(exc, NoInput):
        return "input"
    if isinstance(exc, (SystemExit, KeyboardInterrupt)):
        return "exit"
    if isinstance(exc, NotRunHere):
        return "ipython"
    if isinstance(exc, ModuleNotFoundError):
        return "missing_module"
    text = f"{type(exc).__name__}: {exc}"
    if any(sign in text for sign in FILE_LIMIT_SIGNS):
        return "file_size"
    if isinstance(exc, MemoryError) or any(sign in text for sign in MEMORY_SIGNS):
        return "memory"
    if any(sign in text.lower() for sign in NO_GPU_SIGNS) and not _has_accelerator():
        return "no_gpu"
    return "error"


def _has_accelerator() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    mps = getattr(torch.backends, "mps", None)
    return bool(torch.cuda.is_available() or (mps is not None and mps.is_available()))


def _bound_names(node: ast.stmt) -> list[str]:
    """The module-level names a statement binds (grader/learner/onmachine.py ``names_of``, its stores to names)."""
    return [place.name for place in names_of(node)[0] if place.kind == "name"]


def _is_definition(node: ast.stmt) -> bool:
    """What a stopped cell still makes: definitions, imports, and names bound to a constant."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return True
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if value is None or not _bound_names(node):
        return False
    if isinstance(node, ast.Assign) and not all(isinstance(t, ast.Name) for t in node.targets):
        return False
    try:
        ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


# How Jupyter, Colab and Kaggle start a notebook's kernel: its code finds these in ``sys.argv``.
KERNEL_ARGV = ("/usr/local/lib/python3/dist-packages/ipykernel_launcher.py", "-f",
               "/root/.local/share/jupyter/runtime/kernel.json")


def script_argv(source: Source) -> list[str]:
    """``sys.argv`` as the learner's own machine hands it to the module's code: a ``.py`` file's own name, as
    ``python ex1_device.py`` does, and a notebook's kernel's command line. The learner process's own arguments
    (the grader's fork server's: its path, its role, a descriptor, its isolation) are none of the learner's
    business, and a script's ``args = parser.parse_args()`` at its top (PyTorch's "device-agnostic" idiom,
    ``--disable-cuda``) stopped there on them ("unrecognized arguments"), every function that read ``args``
    then failing (9 of ex1's 20 points). In a notebook ``parse_args()`` stops on the kernel's ``-f`` as it does
    in Jupyter; ``parse_known_args()`` and ``parse_args([])``, which notebooks use, work in both."""
    if source.origin.endswith(".ipynb"):
        return list(KERNEL_ARGV)
    return [source.origin.rsplit("/", 1)[-1]]


def place_helpers(helpers: tuple[Source, ...], workdir: str) -> None:
    """A folder's other modules (``common.py`` beside ``ex2_timing.py``), written into the work dir before any
    top level runs: an exercise's ``import common`` finds them there through ``sys.path``, as in the learner's own
    folder, and the device layer's patches reach their names as they reach a module a ``%%writefile`` wrote
    (both live in the work dir: ``TopLevel.learner_dirs``). One that cannot be written (the course's file-size
    limit) is left out: its import then fails as any missing module's does."""
    for helper in helpers:
        with contextlib.suppress(OSError):
            with open(os.path.join(workdir, f"{helper.module}.py"), "w", encoding="utf-8") as file:
                file.write(helper.text)
    if helpers:
        importlib.invalidate_caches()


class TopLevel(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs the learner modules of one plan, each once: in order, or when another one imports it."""

    def __init__(self, sources: Mapping[str, Source], workdir: str, limits: TopLevelLimits,
                 listener: Listener) -> None:
        self.sources = {s.module: s for s in sources.values()}
        self.workdir = workdir
        self.limits = limits
        self.listener = listener
        self.spent = 0.0
        # Learner functions ("ex2_timing.time_matmul") that ran past a check's limit in this run:
        # later calls of them are answered at once (grader/learner/calls.py).
        self.timed_out: set[str] = set()
        self._deadlines: list[float] = []  # the running cells' deadlines (a cell may import a module)
        # The frames that armed each deadline (a cell's runner, a call's): an import started below
        # the innermost one is the learner's code's (or PyTorch's, for it), and is waited for.
        self._armed_by: list[types.FrameType | None] = []
        self._previous_handler: Any = None
        self._parting: PartedProducts | None = None  # a cell's large products run in parts (``_products``)
        # The top-level statements that asked which machine this is (grader/learner/onmachine.py), heard while
        # ``run_all`` runs: each device session and simulated machine runs them again.
        self.machine_statements: list[MachineStatement] = []
        self._machine_names: dict[int, set[str]] = {}  # by namespace: the names those statements bind
        self._running = 0  # learner modules whose top level is running (one may import another)
        self._asked: Asked | None = None
        sys.meta_path.insert(0, self)

    # -- the import system's side: `import ex1_device` from another learner file -------------
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        source = self.sources.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=self.filename(source))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def filename(self, source: Source) -> str:
        """Where the module seems to live, in the work dir: it is never read from disk (a learner's
        code that deletes or rewrites files there cannot change another file's code)."""
        return os.path.join(self.workdir, f"{source.module}.py")

    def learner_dirs(self) -> set[str]:
        """Where the learner's modules seem to live (both spellings: sys.path holds the resolved cwd)."""
        return {os.path.dirname(spelling(self.filename(s))) + os.sep for s in self.sources.values()
                for spelling in (os.path.abspath, os.path.realpath)}

    def exec_module(self, module: types.ModuleType) -> None:
        source = self.sources[module.__name__]
        filename = self.filename(source)
        module.__file__ = filename
        lines = source.text.splitlines(keepends=True)
        linecache.cache[filename] = (len(source.text), None, lines, filename)  # tracebacks show the lines
        if not self._running:  # one learner module importing another leaves ``sys.argv`` as it is, as Python does
            sys.argv = script_argv(source)
        self._running += 1
        self.listener(TopLevelEvent("importing", source.module))
        try:
            for index, cell in enumerate(source.cells):
                self._run_cell(source, index, cell, module.__dict__)
        finally:
            self._running -= 1
        self.listener(TopLevelEvent("imported", source.module))

    def close(self) -> None:
        """Stop answering imports (the sandbox never needs to; tests that build one do)."""
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        for name in self.sources:
            sys.modules.pop(name, None)

    def module(self, name: str) -> types.ModuleType:
        """The learner module, its top level run (once per process)."""
        return importlib.import_module(name)

    def run_all(self) -> None:
        with Asked() as self._asked:
            for name in self.sources:
                if self.limits.run is None or name in self.limits.run:
                    self.module(name)
        self._asked = None

    # -- one cell ----------------------------------------------------------------------------
    def budget_left(self) -> float:
        return self.limits.budget_s - self.spent

    def _run_cell(self, source: Source, index: int, cell: Cell, namespace: dict[str, Any]) -> None:
        filename = self.filename(source)
        after: list[ast.stmt] = []  # what compiles after a statement that does not (``_around_syntax_error``)
        uncompiled: SyntaxError | None = None
        try:
            tree = _parse(source.cell_text(cell), filename, cell.start)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            line = exc.lineno if isinstance(exc, SyntaxError) and exc.lineno else None
            around = _around_syntax_error(source.cell_text(cell), filename, cell.start, exc) \
                if isinstance(exc, SyntaxError) else None
            if around is None or not around[0].body:
                kept = self._keep_definitions(source, around[1], namespace) if around is not None else ()
                self._stop(source, index, cell, line, "syntax_error", one_line(exc), kept)
                return
            tree, after, uncompiled = around
        if (source.module, index) in self.limits.skip:  # it ended an earlier process: the parent said why
            kept = self._keep_definitions(source, tree.body + after, namespace)
            self.listener(TopLevelEvent("cell_kept", source.module, index, cell.label, kept=kept))
            return
        if self.budget_left() <= 0:
            kept = self._keep_definitions(source, tree.body + after, namespace)
            error = f"the top level ran past its {self.limits.budget_s:g} s"
            self._stop(source, index, cell, None, "budget", error, kept)
            return
        self.listener(TopLevelEvent("cell_start", source.module, index, cell.label))
        started = _monotonic()
        snapshot = dict(namespace)
        before = files_before(self.workdir)
        node: ast.stmt | None = None
        try:
            with self.alarm(min(self.limits.cell_timeout_s, self.budget_left())), \
                    Uncut(_unprinted((source.module, index) in self.limits.shown)), Uncut(self._products()):
                for node in tree.body:
                    code = compile(ast.Module([node], []), filename, "exec", dont_inherit=True)
                    asked = self._before_statement()
                    exec(code, namespace)  # noqa: S102
                    self._after_statement(asked, node, code, namespace)
                node = None
        except BaseException as exc:  # noqa: BLE001 - whatever the learner's cell does, the next one runs
            kind = classify(exc)
            if kind == "error" and files_full(self.workdir, before):
                kind = "file_size"  # whatever the writer said (torch.save: "unexpected pos ...")
            if kind == "memory":
                _restore(namespace, snapshot)  # what the cell grabbed must not starve the checks
            later = tree.body[tree.body.index(node) + 1 :] + after if node is not None else []
            kept = self._keep_definitions(source, later, namespace)
            limit = f"the cell ran past its {self.limits.cell_timeout_s:g} s limit"
            if isinstance(exc, OutlastsCell):
                limit = f"the cell would run past its {self.limits.cell_timeout_s:g} s limit: {exc.why}"
            line = node.lineno if node is not None else None
            self._stop(source, index, cell, line, kind, limit if kind == "timeout" else one_line(exc), kept)
        else:
            if uncompiled is not None:  # the statements before it ran; only the definitions after it are made
                kept = self._keep_definitions(source, after, namespace)
                self._stop(source, index, cell, uncompiled.lineno, "syntax_error", one_line(uncompiled), kept)
        finally:
            self.spent += _monotonic() - started
            self.listener(TopLevelEvent("cell_end", source.module, index, cell.label))

    def _stop(self, source: Source, index: int, cell: Cell, line: int | None,  # noqa: PLR0917
              kind: StopKind, error: str, kept: tuple[str, ...] = ()) -> None:
        in_cell = line - cell.start + 1 if line is not None else None
        self.listener(TopLevelEvent("cell_stop", source.module, index, cell.label,
                                    stop=CellStop(source.module, index, cell.label, in_cell, kind, error, kept)))

    def _before_statement(self) -> tuple[int, int] | None:
        """The machine questions heard and torch functions called so far, or None when neither is counted."""
        if self._asked is None or self._parting is None:
            return None
        self._asked.forget()
        return self._asked.heard, self._parting.calls

    def _after_statement(self, counted: tuple[int, int] | None, node: ast.stmt, code: types.CodeType,
                         namespace: dict[str, Any]) -> None:
        """Keep a statement that bound names from the machine: it asked which machine this is, or read a name an
        earlier such statement bound (``synchronize = torch.cuda.synchronize if device_type == "cuda" else
        ...``), and it did no tensor work."""
        if counted is None or self._asked is None or self._parting is None or self._parting.calls != counted[1]:
            return
        asked = self._asked.heard != counted[0]
        machine_names = self._machine_names.setdefault(id(namespace), set())
        if not asked and not machine_names:  # most statements: nothing to read their names for
            return
        places, read = names_of(node)
        if places and (asked or not read.isdisjoint(machine_names)):
            self.machine_statements.append(MachineStatement(code, namespace, places))
            machine_names.update(place.name for place in places)

    @contextlib.contextmanager
    def _products(self) -> Iterator[None]:
        """Large CPU products in parts the cell's limit can stop (grader/learner/longcalls.py); once,
        for a cell that imports another learner module."""
        if self._parting is not None:
            yield
            return
        try:
            with PartedProducts(lambda: self._deadlines[-1] - _monotonic() if self._deadlines else math.inf,
                                clock=_monotonic) as self._parting:
                yield
        finally:
            self._parting = None

    def _keep_definitions(self, source: Source, nodes: list[ast.stmt],
                          namespace: dict[str, Any]) -> tuple[str, ...]:
        filename = self.filename(source)
        kept: list[str] = []
        with contextlib.suppress(TimeUp), self.alarm(DEFINITIONS_ALLOWANCE_S):
            for node in nodes:
                if not _is_definition(node):
                    continue
                try:
                    exec(compile(ast.Module([node], []), filename, "exec", dont_inherit=True), namespace)  # noqa: S102
                except TimeUp:
                    raise
                except BaseException:  # noqa: BLE001, S112 - a definition that fails is not made
                    continue
                if not isinstance(node, (ast.Import, ast.ImportFrom)):  # the names a learner would look for
                    kept += _bound_names(node)
        return tuple(dict.fromkeys(kept))

    def _on_alarm(self, signum: int, frame: types.FrameType | None) -> None:
        if not self._deadlines:
            return  # pending from an alarm that has ended (its exit disarmed the timer)
        left = self._deadlines[-1] - _monotonic()
        if left > 0:  # not this deadline's timer: one pending from an inner alarm, or a SIGALRM sent by hand
            signal.setitimer(signal.ITIMER_REAL, left)
            return
        if must_wait(frame, self._armed_by[-1]):
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)  # cut just after it instead
            return
        # Again soon, until the alarm's exit sets the timer anew: a TimeUp raised where Python discards
        # exceptions — a weakref callback (the meter's note of each storage that dies), a ``__del__``, a gc
        # callback, all reported as "Exception ignored in" and gone on from — was lost, and the code ran on
        # past its limit until the judge's backstop (tests/test_toplevel.py).
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
        raise TimeUp

    def alarm(self, seconds: float) -> Alarm:
        """SIGALRM raises TimeUp in the learner's code after ``seconds`` (or the enclosing deadline)."""
        return Alarm(self, seconds)


class Alarm:
    """The limit of a cell or a call, for a ``with`` around the learner's code (``TopLevel.alarm``); PyTorch's
    modes the interrupted code had changed are put back (grader/learner/torchstate.py).

    A class, not a generator, as every context manager around the learner's code is (``Uncut``): a limit
    that landed in contextlib's frames, between a generator's ``yield`` and the ``with`` taking it, left the
    alarm's deadline on the list (every later limit of the process at once) or the cell's product mode on
    PyTorch's stack (tests/test_toplevel.py delivers the limit at every instruction)."""

    def __init__(self, toplevel: TopLevel, seconds: float) -> None:
        self.toplevel = toplevel
        self.seconds = seconds
        self.modes: torchstate.TorchModes | None = None

    def __enter__(self) -> None:
        toplevel = self.toplevel
        self.modes = torchstate.capture()
        deadline = _monotonic() + max(self.seconds, 0.001)
        if toplevel._deadlines:
            deadline = min(deadline, toplevel._deadlines[-1])
        else:
            toplevel._previous_handler = signal.signal(signal.SIGALRM, toplevel._on_alarm)
        toplevel._armed_by.append(sys._getframe(1))  # the frame of the `with` statement
        toplevel._deadlines.append(deadline)
        signal.setitimer(signal.ITIMER_REAL, max(deadline - _monotonic(), 0.001))

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        # The deadline goes first: a SIGALRM handled in between finds the enclosing one, or none, and never
        # sets the timer again once it is off (past the handler's restore, a timer would end the process).
        toplevel = self.toplevel
        toplevel._deadlines.pop()
        toplevel._armed_by.pop()
        if toplevel._deadlines:
            signal.setitimer(signal.ITIMER_REAL, max(toplevel._deadlines[-1] - _monotonic(), 0.001))
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, toplevel._previous_handler or signal.SIG_DFL)
        if isinstance(exc, TimeUp):
            torchstate.restore(self.modes)


class Uncut:
    """A context manager of the grader's around the learner's code (the cell's printing and products, a
    call's profile hook), entered and left whole: a limit that lands inside waits (``must_wait``)."""

    def __init__(self, manager: contextlib.AbstractContextManager[Any]) -> None:
        self.manager = manager

    def __enter__(self) -> Any:
        return self.manager.__enter__()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool | None:
        return self.manager.__exit__(kind, exc, tb)


# Where a limit never cuts (``must_wait``): the grader's own changes of PyTorch's mode stack
# (grader/learner/longcalls.py), PyTorch's own (grader/reference/modes.py), the alarm's own start and end, and
# every ``Uncut`` around the learner's code.
SETTLING = UNCUT | TORCH_STACK_CODE | {Alarm.__enter__.__code__, Alarm.__exit__.__code__, Uncut.__enter__.__code__,
                                       Uncut.__exit__.__code__}
# contextlib's frames that start and finish a generator's ``with``: inside one that drives PyTorch's pop and push
# of modes (``TORCH_STACK_GENERATORS``), after its generator popped and before the ``with`` took it, or before
# its generator pushed back, a limit waits too.
_DRIVING = frozenset({contextlib._GeneratorContextManager.__enter__.__code__,
                      contextlib._GeneratorContextManager.__exit__.__code__})


def _parse(code: str, filename: str, first_line: int) -> ast.Module:
    """The cell's statements, numbered as lines of the whole module; SyntaxError's line too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning ("\d") is the learner's business
        try:
            tree = ast.parse(code, filename)
        except SyntaxError as exc:
            if exc.lineno:
                exc.lineno += first_line - 1
            raise
        ast.increment_lineno(tree, first_line - 1)
        compile(tree, filename, "exec", dont_inherit=True)  # `return` outside a function, `break` ...
    return tree


SALVAGED_CELL_CHARS = 200_000
_CONTINUES = re.compile(r"(else|elif|except|finally)\b|[)\]}]")  # a line at column 0 that goes on a statement


def _starts_statement(lines: list[str], i: int) -> bool:
    """Whether line ``i`` begins a top-level statement, as far as its first character and the line before say."""
    line = lines[i]
    if not line or line[0] in " \t#" or _CONTINUES.match(line):
        return False
    before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip() and not lines[j].startswith("#")), "")
    return not before.rstrip().endswith("\\") and not before.startswith("@")


def _around_syntax_error(text: str, filename: str, first_line: int, exc: SyntaxError,
                         depth: int = 0) -> tuple[ast.Module, list[ast.stmt], SyntaxError] | None:
    """A cell that does not compile as a whole: the statements before the top-level statement that does not (they
    run), the statements after it that compile (their definitions are made, as after any statement that stops
    a cell), and its error. In Jupyter a cell that does not compile runs nothing; but one that compiled in the
    learner's notebook, on a newer Python than the grading machine's (Colab's 3.12 f-strings), defined its
    functions there, and a demo line beside them (``print(f"{info["type"]}")``) cost every one of them (0 of
    ex1's 20 points). None where the statements before do not compile either (a long string the lines were
    misread in): the whole cell stops, as before. At most 20 statements that do not compile are stepped over,
    each a parse of the rest, in a cell of at most ``SALVAGED_CELL_CHARS`` (a learner's cell is a few
    thousand; a 10 MB one would cost the learner's own process seconds of parsing before its cell's limit)."""
    lines = text.split("\n")
    error_at = (exc.lineno or 0) - first_line
    if not 0 <= error_at < len(lines) or depth > 20 or len(text) > SALVAGED_CELL_CHARS:
        return None
    start = error_at
    while start > 0 and not _starts_statement(lines, start):
        start -= 1
    end = error_at + 1
    while end < len(lines) and not _starts_statement(lines, end):
        end += 1
    try:
        head = _parse("\n".join(lines[:start]), filename, first_line)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    rest = "\n".join(lines[end:])
    try:
        after = _parse(rest, filename, first_line + end).body
    except SyntaxError as later:
        around = _around_syntax_error(rest, filename, first_line + end, later, depth + 1)
        after = [] if around is None else around[0].body + around[1]
    except (ValueError, RecursionError, MemoryError):
        after = []
    return head, after, exc


def quiet_lost_limits() -> None:
    """A limit raised where Python discards exceptions (a weakref callback, a ``__del__``: ``TopLevel._on_alarm``,
    which raises it again) prints nothing into the learner's output: it is the grader's own, and the grader's
    frames are none of the learner's business. Whatever else Python discards is printed as before."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, TimeUp):
            previous(unraisable)

    sys.unraisablehook = hook


def must_wait(frame: types.FrameType | None, armed_by: types.FrameType | None) -> bool:
    """Whether the interrupted code is where a limit must not cut, between the innermost frame and the
    frame that armed the limit: inside an import that the learner's code (or PyTorch, for it) started
    (an importlib frame), or inside the grader's own code around the learner's (``SETTLING``: its mode's push
    and pop, grader/learner/longcalls.py ``UNCUT``, the alarm's own start and end, every ``Uncut``; cut there,
    a mode stays on the stack for the whole process, modes the learner's cell left are lost, or the alarm's
    deadline stays armed), or inside PyTorch's own pop and push of a mode stack and contextlib's frames that
    drive it (grader/reference/modes.py ``TORCH_STACK_CODE``: cut there, the popped mode came back whenever its
    generator died — the cell's products mode, after the cell had left it, under every later check).

    The whole way up, through the grader's own frames too: an import runs the grader's code inside
    it (this module's ``find_spec`` for every module imported, a stand-in's or the meter's torch
    mode for every op a module's body runs), and a limit landing there is still inside the import.
    Stopping at the first grader frame cut such imports halfway — sympy's hundreds of modules
    each pass through ``find_spec`` — and broke every later training in the process ("module
    'sympy' has no attribute 'core'": 70/100 for a correct notebook on a busy machine). The walk
    stops at the frame that armed the limit: the learner's own module, which the top level runs
    *as* an import above it, is still cut. A limit landing in that frame itself waits too: it is the grader's,
    between two of its ``with`` items or after the body and before the exit (SETTLING)."""
    if frame is not None and frame is armed_by:
        return True
    while frame is not None and frame is not armed_by:
        code = frame.f_code
        if code in SETTLING or code.co_filename.startswith("<frozen importlib"):
            return True
        if code in _DRIVING and _drives_torch_stack(frame):
            return True
        frame = frame.f_back
    return False


def _drives_torch_stack(frame: types.FrameType) -> bool:
    """Whether a contextlib frame is entering or leaving one of PyTorch's pops of its mode stacks."""
    generator = getattr(frame.f_locals.get("self"), "gen", None)
    return isinstance(generator, types.GeneratorType) and generator.gi_code in TORCH_STACK_GENERATORS


def _restore(namespace: dict[str, Any], snapshot: dict[str, Any]) -> None:
    for name in list(namespace):
        if name not in snapshot:
            del namespace[name]
        elif namespace[name] is not snapshot[name]:
            namespace[name] = snapshot[name]
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
