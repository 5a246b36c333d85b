"""The layer rules of grader/layout.py, held over the whole package: every module's imports —
at module level, inside functions, under ``TYPE_CHECKING``, and the modules named to
``importlib.import_module`` — parsed from the source, never imported."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from grader.layout import LAYERS, LEARNER_VIEW, Layer, layer_of
from grader.paths import PACKAGE_DIR, package_file

How = Literal["eager", "lazy", "typing"]  # module level; inside a function (or by name); under TYPE_CHECKING


@dataclass(frozen=True)
class Edge:
    source: str  # "grader.judge.devices"
    target: str  # "grader.wire.messages"
    how: How
    line: int


def module_name(path: Path) -> str:
    return ".".join(("grader", *path.relative_to(PACKAGE_DIR).with_suffix("").parts)).removesuffix(".__init__")


MODULES = {module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def _target(name: str) -> str:
    """The module an import of ``name`` loads: itself, or (``from grader import x``) its package."""
    return name if name in MODULES else name.rpartition(".")[0] if name.rpartition(".")[0] in MODULES else name


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def edges_of(module: str, tree: ast.Module) -> list[Edge]:
    found: list[Edge] = []
    calls_import_module = any(isinstance(node, ast.Call) and (
        isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
        or isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
        for node in ast.walk(tree))

    def visit(node: ast.AST, how: How) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            how = "lazy" if how == "eager" else how
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "typing")
            for child in node.orelse:
                visit(child, how)
            return
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "grader":
            assert node.module is not None
            for alias in node.names:
                found.append(Edge(module, _target(f"{node.module}.{alias.name}"), how, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend(Edge(module, _target(a.name), how, node.lineno) for a in node.names
                         if a.name.split(".")[0] == "grader")
        elif calls_import_module and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value in MODULES and node.value != module:
            found.append(Edge(module, node.value, "lazy", node.lineno))  # a module imported by its name
        for child in ast.iter_child_nodes(node):
            visit(child, how)

    visit(tree, "eager")
    return found


def package_edges() -> list[Edge]:
    return [edge for module, path in MODULES.items()
            for edge in edges_of(module, ast.parse(path.read_text(encoding="utf-8"), str(path)))]


def violations(edges: list[Edge], layers: dict[str, Layer]) -> list[str]:
    """Every edge the layout forbids, in words."""
    def layer(module: str) -> Layer:
        return layer_of(module, tuple(layers.values()))

    found = []
    for edge in edges:
        source, target = layer(edge.source), layer(edge.target)
        where = f"{edge.source}:{edge.line} imports {edge.target} ({edge.how})"
        if source.name == target.name:
            continue
        if target.name in source.starts:
            if edge.how != "lazy":
                found.append(f"{where}: {source.name} may start {target.name} only inside a function")
            continue
        if target.name not in source.imports:
            found.append(f"{where}: {source.name} may not import {target.name}")
        elif not source.runs_in <= target.runs_in:
            found.append(f"{where}: {target.name} does not run everywhere {source.name} does")
    return found


def cycles(edges: list[Edge], layers: dict[str, Layer]) -> list[list[str]]:
    """Import cycles between modules, lazy and TYPE_CHECKING imports included; an import that
    starts another process's role (a layer's ``starts``) begins a new process, not a cycle."""
    table = tuple(layers.values())
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if layer_of(edge.target, table).name not in layer_of(edge.source, table).starts:
            graph.setdefault(edge.source, set()).add(edge.target)
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                walk(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return found


EDGES = package_edges()
LAYER_TABLE = {layer.name: layer for layer in LAYERS}


def _reachable(edges: list[Edge], start: set[str]) -> set[str]:
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
    seen, todo = set(start), list(start)
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


SAMPLE = """
import importlib
from typing import TYPE_CHECKING

import grader.wire.codec
from grader.wire import messages

if TYPE_CHECKING:
    from grader.judge.proxy import LearnerProcess

def later():
    from grader.learner.runner import Runner
    importlib.import_module("grader.run.sandbox")
"""


def test_the_scan_finds_every_kind_of_import() -> None:
    """Module level, inside a function, under TYPE_CHECKING and by name: each is an edge."""
    found = {(edge.target, edge.how) for edge in edges_of("grader.sample", ast.parse(SAMPLE))}
    assert found == {("grader.wire.codec", "eager"), ("grader.wire.messages", "eager"),
                     ("grader.judge.proxy", "typing"), ("grader.learner.runner", "lazy"),
                     ("grader.run.sandbox", "lazy")}
    hows = {(edge.source, edge.target): edge.how for edge in EDGES}
    assert hows[("grader", "grader.commands.selfcheck")] == "lazy"  # grader.check() starts the self-check
    assert hows[("grader.spawn.forkserver", "grader.judge.__main__")] == "lazy"  # a server becomes the judge
    assert len(EDGES) > 300


def test_every_module_is_in_exactly_one_layer_and_every_part_exists() -> None:
    for module in MODULES:
        assert [layer.name for layer in LAYERS if _in(module, layer)] == [layer_of(module).name], module
    for layer in LAYERS:
        for part in layer.parts:
            assert package_file(part).exists(), f"{layer.name}: {part}"
        assert layer.imports <= set(LAYER_TABLE) and layer.starts <= set(LAYER_TABLE), layer.name


def _in(module: str, layer: Layer) -> bool:
    try:
        layer_of(module, (layer,))
    except KeyError:
        return False
    return True


def test_the_package_keeps_its_layer_rules() -> None:
    assert violations(EDGES, LAYER_TABLE) == []


def test_no_module_imports_itself_back() -> None:
    assert cycles(EDGES, LAYER_TABLE) == []


def test_the_wire_imports_nothing_of_the_grader() -> None:
    wire = [edge for edge in EDGES if layer_of(edge.source).name == "wire"]
    assert wire and all(layer_of(edge.target).name == "wire" for edge in wire), wire


def test_the_judge_never_reaches_the_learner_process_code() -> None:
    """Not directly, not through anything it imports (the checks included)."""
    judge = {m for m in MODULES if layer_of(m).name in ("judge", "checks")}
    reached = {layer_of(m).name for m in _reachable(EDGES, judge) if m in MODULES}
    assert not reached & {"learner", "emulation"}, reached


def test_what_runs_in_the_learner_process_imports_only_what_is_there() -> None:
    """The learner process's view of the package (grader/run/isolation.py binds LEARNER_VIEW) holds
    everything the code that runs there imports, eagerly or lazily — but a fork server's start of
    the judge, which happens only in the judge's own server, outside any sandbox."""
    for edge in EDGES:
        source, target = layer_of(edge.source), layer_of(edge.target)
        if "learner" in source.runs_in and not (target.name in source.starts and "learner" not in target.runs_in):
            assert "learner" in target.runs_in, edge
            assert any(part in LEARNER_VIEW for part in target.parts), edge


def test_commands_are_started_only_by_the_package_entry_points() -> None:
    importers = {edge.source for edge in EDGES
                 if layer_of(edge.target).name == "commands" and layer_of(edge.source).name != "commands"}
    assert importers == {"grader"}, importers  # grader.check() and grader.doctor(), lazily


def test_the_learner_sandbox_binds_exactly_the_layout_view() -> None:
    from grader.run.isolation import PACKAGE_VIEW, view_args

    args = view_args(64)
    bound = {args[i + 2].removeprefix(f"{PACKAGE_VIEW}/grader/") for i, arg in enumerate(args)
             if arg == "--ro-bind" and args[i + 2].startswith(f"{PACKAGE_VIEW}/")}
    assert bound == set(LEARNER_VIEW)
    assert {"wire", "learner", "emulation", "reference", "spawn"} <= bound
    assert not bound & {"judge", "checks", "run", "commands", "score", "course.py", "errors.py"}


# -- the rules fail on a package that breaks them ----------------------------------------------------
def _edge(source: str, target: str, how: How = "eager") -> Edge:
    return Edge(source, target, how, 1)


@pytest.mark.parametrize(("edge", "why"), [
    (_edge("grader.wire.codec", "grader.learner.runner"), "wire may not import learner"),
    (_edge("grader.wire.values", "grader.paths", "typing"), "wire may not import root"),
    (_edge("grader.judge.devices", "grader.emulation.standin"), "judge may not import emulation"),
    (_edge("grader.checks.ex1_device.common", "grader.learner.values", "lazy"), "checks may not import learner"),
    (_edge("grader.learner.runner", "grader.run.sandbox"), "learner may not import run"),
    (_edge("grader.emulation.standin", "grader.learner.calls"), "emulation may not import learner"),
    (_edge("grader.outputs.report", "grader.commands.cli", "lazy"), "outputs may not import commands"),
    (_edge("grader.spawn.forkserver", "grader.learner.__main__"), "spawn may start learner only inside a function"),
    (_edge("grader", "grader.commands.selfcheck"), "root may start commands only inside a function"),
])
def test_the_rules_catch_an_import_the_layout_forbids(edge: Edge, why: str) -> None:
    found = violations([*EDGES, edge], LAYER_TABLE)
    assert len(found) == 1 and why in found[0], found


def test_the_rules_catch_a_layer_that_lies_about_where_it_runs() -> None:
    """A layer the judge imports must run in the judge: declaring that errors runs only in the grader
    makes the judge's import of it a violation."""
    table = {**LAYER_TABLE, "errors": Layer("errors", ("errors.py",), frozenset({"grader"}), frozenset({"wire"}))}
    found = violations(EDGES, table)
    assert found and all("errors does not run everywhere judge does" in f for f in found), found


def test_the_rules_catch_a_cycle_and_a_judge_that_reaches_the_learner() -> None:
    looped = [*EDGES, _edge("grader.wire.messages", "grader.wire.codec", "lazy")]
    assert [set(cycle) for cycle in cycles(looped, LAYER_TABLE)] == [{"grader.wire.codec", "grader.wire.messages"}]
    reaching = [*EDGES, _edge("grader.reference.problems", "grader.emulation.standin", "lazy")]
    judge = {m for m in MODULES if layer_of(m).name in ("judge", "checks")}
    assert "grader.emulation.standin" in _reachable(reaching, judge)
    assert violations(reaching, LAYER_TABLE)  # and the layer rule says so too
