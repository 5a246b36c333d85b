"""The package's layers, declared once: where each runs, whom it trusts, what it may import.

Three kinds of process grade a submission (grader/wire/messages.py): the **grader** (trusted: the
command line, the course, the reports), the **judge** (trusted: the checks and every verdict) and
the **learner process** (untrusted: the learner's code runs there). A layer is a folder (or a few
top-level modules) whose code runs in the same processes and may import the same layers:

- what runs in the learner process — ``LEARNER_VIEW``, derived from this table — is all of the
  package its sandbox can see (grader/run/isolation.py binds exactly these paths, read-only);
- ``starts`` names a layer a process becomes, imported lazily inside a function (a fork server
  becoming the judge or the learner process; ``grader.check()`` starting the self-check);
- tests/test_layers.py parses every module's imports and holds the package to this table.

Standard library only: the grader's process reads it to build the sandbox, without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Process = Literal["grader", "judge", "learner"]
EVERYWHERE: frozenset[Process] = frozenset({"grader", "judge", "learner"})


@dataclass(frozen=True)
class Layer:
    name: str
    parts: tuple[str, ...]  # relative to grader/: a folder ("wire") or a module ("paths.py")
    runs_in: frozenset[Process]
    imports: frozenset[str]  # the layers its modules may import at any time (its own always)
    starts: frozenset[str] = frozenset()  # layers it may import only inside a function: a process it becomes
    trusted: bool = True  # False: the learner's code runs beside it and may have changed anything there


def _layer(name: str, parts: tuple[str, ...], runs_in: set[Process], imports: set[str], *,
           starts: set[str] | None = None, trusted: bool = True) -> Layer:
    return Layer(name, parts, frozenset(runs_in), frozenset(imports), frozenset(starts or ()), trusted)


LAYERS: tuple[Layer, ...] = (
    # The package itself: its public API (grader.check, grader.doctor, grader.emulated), where its
    # files are, this table. grader.emulated() puts a stand-in GPU into the caller's own process.
    _layer("root", ("__init__.py", "paths.py", "layout.py"), set(EVERYWHERE), set(), starts={"commands", "emulation"}),
    # The messages between the three processes, their codec and framing: imported by all, importing none.
    _layer("wire", ("wire",), set(EVERYWHERE), set()),
    # The course's definitions both the judge and the learner process compute with: the emulated
    # devices' facts, the problems and reference computations, the live-tensor meter.
    _layer("reference", ("reference",), {"judge", "learner"}, {"wire"}),
    # The stand-in accelerators and what patches torch for them.
    _layer("emulation", ("emulation",), {"learner"}, {"wire", "reference"}, trusted=False),
    # The learner process: runs the learner's top level and the calls the judge asks for.
    _layer("learner", ("learner",), {"learner"}, {"root", "wire", "reference", "emulation"}, trusted=False),
    # A child's start-up before its role's main: fork servers, limits, namespaces, privileges (the
    # grader applies the limits in an exec'd child before exec, and names its conventions).
    _layer("spawn", ("spawn",), set(EVERYWHERE), {"wire"}, starts={"judge", "learner"}),
    # The judge: pytest, its plugin, the learner process's proxy, the check author's API.
    _layer("judge", ("judge",), {"judge"}, {"root", "wire", "reference", "errors"}),
    # The checks: one module per check, their exercise's helpers, pytest's conftest.
    _layer("checks", ("checks",), {"judge"}, {"judge", "reference"}),
    # YAML in and out of the grader's process: course.yaml, its texts, the reports, the class's files.
    _layer("yaml", ("yamltext.py",), {"grader"}, set()),
    # The grader's failures: the one user-facing error type, exit codes, why grading could not run.
    _layer("errors", ("errors.py",), {"grader", "judge"}, {"wire"}),
    # course.yaml, typed and validated once.
    _layer("config", ("course.py",), {"grader"}, {"root", "wire", "errors", "yaml"}),
    # What the grader reads of a submission before any sandbox exists.
    _layer("intake", ("intake",), {"grader"}, {"root", "wire", "errors", "config"}),
    # Points, statuses, the learner-facing texts.
    _layer("score", ("score",), {"grader"}, {"root", "wire", "errors", "config", "intake", "yaml"}),
    # Running a grading: the sandbox, the launchers, isolation, cgroups, the reaper, blame.
    _layer("run", ("run",), {"grader"}, {"root", "wire", "errors", "config", "spawn", "score"}),
    # What a grading writes: the YAML report and its seal, the terminal, the gradebook, the
    # class summary, Gradescope's results.json.
    _layer("outputs", ("outputs",), {"grader"}, {"root", "wire", "errors", "config", "intake", "score", "yaml"}),
    # The pipeline: load -> run -> score.
    _layer("grading", ("grading.py",), {"grader"}, {"root", "wire", "errors", "config", "intake", "run", "score"}),
    # The command line and what each command does.
    _layer("commands", ("commands", "__main__.py"), {"grader"},
           {"root", "wire", "errors", "config", "intake", "score", "run", "outputs", "grading", "yaml"}),
)
BY_NAME: dict[str, Layer] = {layer.name: layer for layer in LAYERS}
# The package as the learner process sees it: every layer that runs there, nothing else.
LEARNER_VIEW: tuple[str, ...] = tuple(part for layer in LAYERS if "learner" in layer.runs_in for part in layer.parts)


def layer_of(module: str, layers: tuple[Layer, ...] = LAYERS) -> Layer:
    """The layer of a module of the package ("grader.wire.codec" -> wire); KeyError for none."""
    relative = module.split(".")[1:]
    for layer in layers:
        for part in layer.parts:
            name = part.removesuffix(".py").split("/")
            if relative[: len(name)] == name or (part == "__init__.py" and not relative):
                return layer
    raise KeyError(f"{module} is in no layer of grader/layout.py")
