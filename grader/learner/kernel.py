"""What a notebook's code finds in the sandbox: a small stand-in for the IPython kernel.

grader/intake/submission.py turns `!cmd`, `%magic` and `%%magic` into the calls IPython itself makes of
them (`get_ipython().system(...)`, `.getoutput(...)`, `.run_line_magic(...)`,
`.run_cell_magic(...)`), as `jupyter nbconvert --to script` writes them too. This module answers
those calls the way IPython would, so that `files = !ls` is a list of lines and
`t = %timeit -o f()` has `.best` — or, for a form it does not run, raises `NotRunHere`: the
cell stops there, is recorded as skipped, and no made-up value can fail later.

Shell lines run for real, in the sandbox's work dir (they can do nothing the learner's Python
cannot); package installs (`!pip install`, `%pip`, `conda`, `apt`) are not run, and say so.
`input()` raises `NoInput` at once (nobody types while grading). `display()` shows nothing.
`google.colab` and, where IPython is not installed, `IPython.display` are harmless stubs.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
import timeit
import types
from collections.abc import Callable
from typing import Any, TextIO

from grader.wire.ipython import PYTHON_BODY_CELL_MAGICS, python_of

_INSTALL = re.compile(
    r"^\s*(sudo\s+)?((python3?|py)\s+-m\s+)?(pip3?|conda|mamba|micromamba|apt|apt-get|uv\s+pip|yum|brew)"
    r"\s+(install|uninstall|upgrade|update|remove)\b"
)
# Line magics that change only how IPython itself behaves or shows things: nothing to do here.
_QUIET_MAGICS = frozenset({
    "matplotlib", "load_ext", "reload_ext", "unload_ext", "autoreload", "aimport", "config", "precision",
    "xmode", "pdb", "colors", "automagic", "autocall", "lsmagic", "magic", "quickref", "pinfo", "pinfo2", "pdoc",
    "psource", "pfile", "pdef", "history", "hist", "page", "notebook", "tb", "doctest_mode", "autosave",
    "autoawait", "clear", "alias_magic", "alias", "unalias", "rehashx", "logstart", "logstop", "logon", "logoff",
    "reset", "reset_selective", "store", "debug", "killbgscripts", "gui", "connect_info", "qtconsole",
})
_INSTALL_MAGICS = frozenset({"pip", "conda", "mamba", "micromamba", "uv"})
# IPython's default aliases: `%ls -l` is `!ls -l`.
_SHELL_ALIASES = frozenset({"ls", "ll", "lf", "lk", "lx", "ldir", "cat", "cp", "mkdir", "mv", "rm", "rmdir"})
_DISPLAY_CELL_MAGICS = frozenset({"html", "HTML", "javascript", "js", "markdown", "latex", "svg", "capture_output"})
_INTERPRETER_CELL_MAGICS = {"bash": ["bash"], "sh": ["sh"], "python": [sys.executable], "python3": [sys.executable],
                            "perl": ["perl"], "ruby": ["ruby"]}


class NotRunHere(Exception):
    """An IPython form the grader does not run; the cell stops here and is recorded as skipped."""

    def __init__(self, form: str) -> None:
        super().__init__(f"{form} is not run while grading")
        self.form = form


class NoInput(EOFError):
    """input() while grading: nobody is there to type."""


class SList(list[str]):
    """What IPython's ``x = !cmd`` gives: a list of lines, plus its ``.s``/``.n``/``.l`` views."""

    @property
    def s(self) -> str:
        return " ".join(self)

    @property
    def n(self) -> str:
        return "\n".join(self)

    @property
    def l(self) -> list[str]:  # noqa: E743 - IPython's name
        return list(self)

    @property
    def p(self) -> list[str]:
        return [line for line in self if os.path.exists(line)]

    def grep(self, pattern: str, prune: bool = False, field: int | None = None) -> SList:
        def text(line: str) -> str:
            parts = line.split()
            return parts[field] if field is not None and len(parts) > abs(field) else line

        found = [line for line in self if bool(re.search(pattern, text(line))) != prune]
        return SList(found)

    def fields(self, *indices: int) -> SList:
        rows = [line.split() for line in self]
        if not indices:
            return SList(" ".join(row) for row in rows)
        return SList(" ".join(row[i] for i in indices if -len(row) <= i < len(row)) for row in rows)


def _seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if value >= scale or unit == "ns":
            return f"{value / scale:.3g} {unit}"
    return f"{value} s"


class TimeitResult:
    """What ``t = %timeit -o stmt`` gives, with IPython's attributes."""

    def __init__(self, loops: int, repeat: int, all_runs: list[float], compile_time: float = 0.0) -> None:
        self.loops = loops
        self.repeat = repeat
        self.all_runs = all_runs
        self.compile_time = compile_time
        self.timings = [run / loops for run in all_runs]
        self.best = min(self.timings)
        self.worst = max(self.timings)
        self.average = statistics.fmean(self.timings)
        self.stdev = statistics.pstdev(self.timings) if len(self.timings) > 1 else 0.0

    def __str__(self) -> str:
        runs = "run" if self.repeat == 1 else "runs"
        loops = "loop" if self.loops == 1 else "loops"
        return (f"{_seconds(self.average)} ± {_seconds(self.stdev)} per loop (mean ± std. dev. of {self.repeat} "
                f"{runs}, {self.loops:,} {loops} each)")

    def __repr__(self) -> str:
        return f"<TimeitResult : {self}>"


def _caller_globals(depth: int = 2) -> dict[str, Any]:
    """The namespace of the learner's cell that called into the kernel."""
    return sys._getframe(depth).f_globals


def _timeit_options(line: str) -> tuple[dict[str, str], str]:
    """``-n 10 -r 3 -o f()`` -> ({"n": "10", "r": "3", "o": ""}, "f()")."""
    options: dict[str, str] = {}
    rest = line.strip()
    while rest.startswith("-"):
        flag, _, rest = rest.partition(" ")
        rest = rest.lstrip()
        letter, value = flag[1:2], flag[2:]
        if letter in "nrp" and not value:
            value, _, rest = rest.partition(" ")
            rest = rest.lstrip()
        options[letter] = value
    return options, rest


class Kernel:
    """``get_ipython()`` in the sandbox."""

    def __init__(self) -> None:
        self.kernel = None  # a real kernel object has one; code that checks for it sees none here
        self.config: dict[str, Any] = {}

    @property
    def user_ns(self) -> dict[str, Any]:
        return _caller_globals()

    # -- shell lines ------------------------------------------------------------------------
    def system(self, cmd: str) -> None:
        if _INSTALL.match(cmd):
            print(f"[grader] not run while grading: {cmd.strip()}")
            return
        out: TextIO = sys.stdout
        if out is not sys.__stdout__:  # inside %%capture (or redirect_stdout): through sys.stdout
            out.write(str(self.getoutput(cmd, split=False)))
            return
        out.flush()
        sys.stderr.flush()
        subprocess.run(cmd, shell=True, check=False, stdin=subprocess.DEVNULL)  # noqa: S602 - the learner's own line

    def getoutput(self, cmd: str, split: bool = True) -> SList | str:
        if _INSTALL.match(cmd):
            print(f"[grader] not run while grading: {cmd.strip()}")
            return SList() if split else ""
        proc = subprocess.run(cmd, shell=True, check=False, stdin=subprocess.DEVNULL,  # noqa: S602
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        text = proc.stdout.decode("utf-8", errors="replace")
        return SList(text.splitlines()) if split else text

    # -- magics -----------------------------------------------------------------------------
    def run_line_magic(self, name: str, line: str, _stack_depth: int = 1) -> Any:
        namespace = _caller_globals(1 + _stack_depth)
        if name in _QUIET_MAGICS:
            return None
        if name in _INSTALL_MAGICS:
            print(f"[grader] not run while grading: %{name} {line}".rstrip())
            return None
        if name in _SHELL_ALIASES:
            return self.system(f"{name} {line}")
        if name in ("system", "sx"):
            return self.getoutput(line) if name == "sx" else self.system(line)
        if name == "time":
            return _time(line, namespace)
        if name == "timeit":
            return _timeit(line, namespace)
        if name == "prun":
            return _run_python(line, namespace)
        if name == "env":
            return _env(line)
        if name == "cd":
            return _cd(line)
        if name == "pwd":
            return os.getcwd()
        if name == "run":
            return _run_file(line, namespace)
        if name in ("who", "whos", "who_ls"):
            names = sorted(k for k, v in namespace.items()
                           if not k.startswith("_") and not isinstance(v, types.ModuleType))
            if name == "who_ls":
                return names
            print("  ".join(names) if names else "Interactive namespace is empty.")
            return None
        raise NotRunHere(f"%{name}")

    def run_cell_magic(self, name: str, line: str, cell: str) -> Any:
        namespace = _caller_globals()
        if name in PYTHON_BODY_CELL_MAGICS:
            # nbconvert writes `%%time` cells this way: the body is the cell's own code.
            return _run_python(cell, namespace, timed=name in ("time", "timeit"))
        if name == "writefile":
            return _writefile(line, cell)
        if name == "capture":
            return _capture(line, cell, namespace)
        if name in _DISPLAY_CELL_MAGICS:
            return None
        if name in _INTERPRETER_CELL_MAGICS or name == "script":
            args = shlex.split(line)
            command = _INTERPRETER_CELL_MAGICS.get(name) or args[:1] or ["sh"]
            sys.stdout.flush()
            subprocess.run(command, input=cell.encode(), check=False)
            return None
        raise NotRunHere(f"%%{name}")

    def magic(self, line: str) -> Any:  # the old spelling: get_ipython().magic("timeit f()")
        name, _, rest = line.lstrip("%").partition(" ")
        return self.run_line_magic(name, rest, _stack_depth=2)

    def __getattr__(self, name: str) -> Any:
        raise NotRunHere(f"get_ipython().{name}")


def _compile(source: str, mode: str) -> types.CodeType:
    """A magic's Python; a cell body may hold IPython syntax itself, as in IPython."""
    return compile(python_of(source) if mode == "exec" else source, "<magic>", mode, dont_inherit=True)


def _run_python(source: str, namespace: dict[str, Any], *, timed: bool = False) -> Any:
    started, cpu = time.perf_counter(), time.process_time()
    exec(_compile(source, "exec"), namespace)  # noqa: S102 - the learner's own cell
    if timed:
        _print_times(time.perf_counter() - started, time.process_time() - cpu)
    return None


def _print_times(wall: float, cpu: float) -> None:
    print(f"CPU times: total: {_seconds(cpu)}\nWall time: {_seconds(wall)}")


def _time(line: str, namespace: dict[str, Any]) -> Any:
    started, cpu = time.perf_counter(), time.process_time()
    try:
        code = _compile(line, "eval")
    except SyntaxError:
        exec(_compile(line, "exec"), namespace)  # noqa: S102
        value = None
    else:
        value = eval(code, namespace)  # noqa: S307 - the learner's own expression
    _print_times(time.perf_counter() - started, time.process_time() - cpu)
    return value


def _timeit(line: str, namespace: dict[str, Any]) -> TimeitResult | None:
    options, statement = _timeit_options(line)
    timer = timeit.Timer(statement or "pass", globals=namespace)
    repeat = int(options.get("r") or 7)
    if options.get("n"):
        loops = int(options["n"])
    else:  # as IPython: the smallest power of ten whose loop takes at least 0.2 s
        loops = 1
        while loops < 10**9:
            if timer.timeit(loops) >= 0.2:
                break
            loops *= 10
    result = TimeitResult(loops, repeat, timer.repeat(repeat, loops))
    if "q" not in options:
        print(result)
    return result if "o" in options else None


def _env(line: str) -> Any:
    line = line.strip()
    if not line:
        return dict(os.environ)
    if "=" in line or " " in line:
        name, _, value = line.partition("=") if "=" in line else line.partition(" ")
        os.environ[name.strip()] = value.strip()
        print(f"env: {name.strip()}={value.strip()}")
        return None
    return os.environ.get(line, "")


def _cd(line: str) -> None:
    target = os.path.expanduser(line.strip() or "~")
    try:
        os.chdir(target)
        print(os.getcwd())
    except OSError as exc:
        print(f"[Errno {exc.errno}] {exc.strerror}: {target!r}")


def _run_file(line: str, namespace: dict[str, Any]) -> None:
    args = shlex.split(line)
    path = next((a for a in args if not a.startswith("-")), "")
    if not os.path.isfile(path):
        print(f"ERROR:root:File `{path}` not found.")
        return
    with open(path, encoding="utf-8") as script:
        source = script.read()
    scope: dict[str, Any] = {"__name__": "__main__", "__file__": path}
    exec(compile(source, path, "exec", dont_inherit=True), scope)  # noqa: S102 - as %run does
    namespace.update({k: v for k, v in scope.items() if not k.startswith("__")})


class CapturedIO:
    """What ``%%capture out`` binds: the cell's printed output, kept instead of shown."""

    def __init__(self, stdout: str, stderr: str) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.outputs: list[Any] = []

    def show(self) -> None:
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)

    __call__ = show


def _capture(line: str, cell: str, namespace: dict[str, Any]) -> None:
    args = shlex.split(line)
    name = next((a for a in args if not a.startswith("-")), "")
    out, err = io.StringIO(), io.StringIO()
    keep_out, keep_err = "--no-stdout" not in args, "--no-stderr" not in args
    try:
        with (contextlib.redirect_stdout(out) if keep_out else contextlib.nullcontext(),
              contextlib.redirect_stderr(err) if keep_err else contextlib.nullcontext()):
            exec(_compile(cell, "exec"), namespace)  # noqa: S102 - the learner's own cell
    finally:
        if name:
            namespace[name] = CapturedIO(out.getvalue(), err.getvalue())


def _writefile(line: str, cell: str) -> None:
    args = shlex.split(line)
    append = "-a" in args or "--append" in args
    path = next((a for a in args if not a.startswith("-")), "")
    if not path:
        raise NotRunHere("%%writefile without a file name")
    existed = os.path.exists(path)
    with open(path, "a" if append else "w", encoding="utf-8") as out:
        out.write(cell)
    print(f"{'Appending to' if append else 'Overwriting' if existed else 'Writing'} {path}")
    importlib.invalidate_caches()  # `import helper` right after `%%writefile helper.py`


def display(*objs: Any, **kwargs: Any) -> None:
    """IPython's display(): in the sandbox nothing is shown."""
    return None


def no_input(prompt: object = "") -> str:
    print(prompt, end="", flush=True)
    raise NoInput("input() was called, but nobody can type an answer while grading")


def _stub_module(name: str, attributes: dict[str, Any]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


class _Shown:
    """IPython.display.HTML / Markdown / Image ...: holds its data, shows nothing."""

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        self.data = data


def _display_names() -> dict[str, Any]:
    shown = {name: type(name, (_Shown,), {}) for name in (
        "HTML", "Markdown", "Image", "JSON", "Javascript", "Latex", "Math", "SVG", "Audio", "Video", "IFrame",
        "Pretty", "Code", "FileLink", "ProgressBar")}
    return {"display": display, "clear_output": lambda *a, **k: None, "update_display": lambda *a, **k: None,
            "display_html": display, "display_markdown": display, "display_png": display, **shown}


def _graded_check(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """``grader.check()`` in a notebook being graded: nothing (a grader inside the grader)."""
    return {}


def _graded_doctor(*args: Any, **kwargs: Any) -> bool:
    return True


def _graded_grader() -> None:
    """The ``grader`` a graded notebook's ``import grader`` gets: ``check()`` and ``doctor()`` do
    nothing. Installed here, by the learner process itself, instead of being switched by a marker
    in the environment (``GRADER_SANDBOX=1`` before issue 22), which told the learner's code it was
    graded. The real package keeps serving the grader's own imports (the same ``__path__``)."""
    real = sys.modules.get("grader")
    if real is None:
        return
    graded = _stub_module("grader", {name: getattr(real, name) for name in ("__doc__", "__file__", "__path__",
                                                                            "__spec__", "__version__", "emulated")
                                     if hasattr(real, name)})
    graded.check = _graded_check  # type: ignore[attr-defined]
    graded.doctor = _graded_doctor  # type: ignore[attr-defined]
    sys.modules["grader"] = graded


def install(kernel: Kernel) -> None:
    """Make the stand-in kernel what the learner's cells see; before any learner code runs."""
    _graded_grader()
    builtins.get_ipython = lambda: kernel  # type: ignore[attr-defined]
    builtins.display = display  # type: ignore[attr-defined]
    builtins.input = no_input
    drive = _stub_module("google.colab.drive", {"mount": lambda *a, **k: print("Mounted (not while grading)."),
                                                "flush_and_unmount": lambda *a, **k: None})
    files = _stub_module("google.colab.files", {"upload": lambda *a, **k: {}, "download": lambda *a, **k: None})
    output = _stub_module("google.colab.output", {"clear": lambda *a, **k: None,
                                                  "enable_custom_widget_manager": lambda *a, **k: None})
    colab = _stub_module("google.colab", {"drive": drive, "files": files, "output": output})
    google = sys.modules.get("google") or _stub_module("google", {"__path__": []})
    google.colab = colab  # type: ignore[attr-defined]
    sys.modules.setdefault("google", google)
    sys.modules.update({"google.colab": colab, "google.colab.drive": drive, "google.colab.files": files,
                        "google.colab.output": output})
    if importlib.util.find_spec("IPython") is None:
        shown = _display_names()
        ipython_display = _stub_module("IPython.display", shown)
        core_display = _stub_module("IPython.core.display", shown)
        core = _stub_module("IPython.core", {"display": core_display, "__path__": []})
        sys.modules.update({
            "IPython": _stub_module("IPython", {"get_ipython": lambda: kernel, "display": ipython_display,
                                                "core": core, "__path__": []}),
            "IPython.display": ipython_display, "IPython.core": core, "IPython.core.display": core_display,
        })
    else:  # the real IPython (a Colab self-check): outside a kernel it would give None
        when_imported("IPython", lambda ipython: setattr(ipython, "get_ipython", lambda: kernel))


def when_imported(name: str, patch: Callable[[types.ModuleType], None]) -> None:
    """``patch`` the module ``name`` now if it is imported, else as soon as code imports it. The real
    IPython costs 0.1 s to import: an exec'd learner process (``grader grade``, a notebook's self-check,
    both where IPython is installed) paid it before its first check, for code that seldom imports it."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    # One patch a module: a later one (the kernel installed again, in the grader's own tests) replaces it.
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, _PatchOnImport) and f.name == name)]
    sys.meta_path.insert(0, _PatchOnImport(name, patch))


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds one module as the finders after it do, and patches it once it has run; then steps aside. A
    ``find_spec`` that loads nothing (``importlib.util.find_spec("IPython")``, as libraries probe for what is
    installed) leaves it in place."""

    def __init__(self, name: str, patch: Callable[[types.ModuleType], None]) -> None:
        self.name, self._patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        spec: importlib.machinery.ModuleSpec | None = None
        for other in sys.meta_path:
            find = getattr(other, "find_spec", None)
            if not isinstance(other, _PatchOnImport) and find is not None:
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None:
            return spec
        found, loader, patch, finder = spec, spec.loader, self._patch, self

        class Patching(importlib.abc.Loader):
            def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
                return loader.create_module(spec)

            def exec_module(self, module: types.ModuleType) -> None:
                module.__loader__ = found.loader = loader  # the module's own loader again, as if never patched
                with contextlib.suppress(ValueError):
                    sys.meta_path.remove(finder)
                loader.exec_module(module)
                patch(module)

        spec.loader = Patching()
        return spec
