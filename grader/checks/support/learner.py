"""The learner's module as checks see it: imported lazily, every call guarded.

A call to a learner function that raises becomes LearnerRaised (with the learner's line),
a missing function or NotImplementedError becomes NotAttempted, so a check body reads
like the exercise: ``y = ex3.roundtrip(x, device)``.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from grader.checks.support.outcomes import ImportTimedOut, LearnerRaised, NotAttempted

# pytest-timeout's Failed and pytest's own outcomes must pass through untouched.
_PASS_THROUGH: tuple[type[BaseException], ...] = (KeyboardInterrupt, GeneratorExit)
try:
    from _pytest.outcomes import OutcomeException

    _PASS_THROUGH = (*_PASS_THROUGH, OutcomeException)
except ImportError:  # pragma: no cover - pytest is always there in the child
    pass


@dataclass(frozen=True)
class SourceInfo:
    module: str
    origin: str
    cell_of_line: tuple[int, ...] = ()
    text: str = ""
    filename: str = ""

    def where(self, line: int) -> str:
        if not self.cell_of_line or line > len(self.cell_of_line):
            return f"{self.origin}, line {line}"
        cell = self.cell_of_line[line - 1]
        first = self.cell_of_line.index(cell) + 1
        return f"{self.origin}, cell {cell}, line {line - first + 1}"


def learner_location(exc: BaseException, source: SourceInfo) -> str:
    """The deepest frame of the traceback that is in the learner's file."""
    module_file = f"{source.module}.py"
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.endswith(module_file) and frame.lineno:
            line = frame.lineno
    return source.where(line) if line else source.origin


# Set by the sandboxed child: told when a learner module starts and ends importing, so
# that a crash during import is charged to every exercise in that file, not to one check.
import_listener: Callable[[str, str], None] | None = None


def _tell(event: str, module: str) -> None:
    if import_listener is not None:
        import_listener(event, module)


_LEARNER_DIRS: set[str] = set()  # where the learner's modules (and a folder's helpers) live


def learner_namespaces() -> list[dict[str, Any]]:
    """The globals of every imported module whose file is in the learner's work dir."""
    namespaces = []
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if isinstance(filename, str) and filename.startswith(tuple(_LEARNER_DIRS)):
            namespaces.append(vars(module))
    return namespaces


def _import_from_text(source: SourceInfo) -> ModuleType:
    """Import the learner's module from the text the grader read, not from disk.

    The learner's code can delete or rewrite any file in its work dir; its modules were
    already read by the grader, so one file's code cannot spoil another file's import.
    """
    if source.module in sys.modules:
        return sys.modules[source.module]
    spec = importlib.util.spec_from_loader(source.module, loader=None, origin=source.filename)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = source.filename
    # Both spellings: a helper's __file__ comes from sys.path, which holds the resolved cwd.
    for spelling in (os.path.abspath, os.path.realpath):
        _LEARNER_DIRS.add(os.path.dirname(spelling(source.filename)) + os.sep)
    lines = source.text.splitlines(keepends=True)
    linecache.cache[source.filename] = (len(source.text), None, lines, source.filename)  # tracebacks show the lines
    sys.modules[source.module] = module
    exec(compile(source.text, source.filename, "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    return module


class LearnerModule:
    def __init__(self, source: SourceInfo) -> None:
        self._source = source
        self._module: ModuleType | None = None
        self._error: LearnerRaised | ImportTimedOut | None = None

    @property
    def source(self) -> SourceInfo:
        return self._source

    def load(self) -> ModuleType:
        """Import once; an import that failed fails the same way for every later check."""
        if self._error is not None:
            raise self._error
        if self._module is None:
            _tell("importing", self._source.module)
            try:
                self._module = _import_from_text(self._source)
                _tell("imported", self._source.module)
            except _PASS_THROUGH as exc:
                sys.modules.pop(self._source.module, None)
                if str(exc).startswith("Timeout"):  # pytest-timeout stopped the import
                    self._error = ImportTimedOut(self._source.origin)  # type: ignore[assignment]
                raise
            except BaseException as exc:  # noqa: BLE001 - any failure of learner code is a result
                sys.modules.pop(self._source.module, None)
                self._error = LearnerRaised(exc, learner_location(exc, self._source), "import")
                raise self._error from None
        return self._module

    def value(self, name: str) -> Any:
        module = self.load()
        if not hasattr(module, name):
            raise NotAttempted(name)
        return getattr(module, name)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        func = self.value(name)
        if not callable(func):
            raise NotAttempted(name)
        return self._guard(name, func)

    def _guard(self, name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        source = self._source

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except NotImplementedError:
                raise NotAttempted(name) from None
            except _PASS_THROUGH:
                raise
            except BaseException as exc:  # noqa: BLE001 - SystemExit too: learner code must not end grading
                raise LearnerRaised(exc, learner_location(exc, source), name) from None

        return call
