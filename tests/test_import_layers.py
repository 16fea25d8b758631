"""Imports point down: the module graph of ``hyper_parallel`` has no cycle, and no layer imports
a layer above it.

The layers, bottom to top::

    utils, platform, protocols   framework-free foundations
    models, data                 the model and the data pipeline
    runtime                      the training algorithms (optimizer, step, checkpoint, callbacks)
    components                   Configurable wrappers of the runtime
    trainer                      the engine, the legacy schema and its parser
    config, codegen, entries     the config manager, recipes, the generator, train.py

Inside the generator its stages point one way too (:data:`CODEGEN_STAGES`)::

    codegen.errors  <-  table  <-  rendering  <-  migration  <-  pipeline, staleness, __main__

The graph is read with ``ast`` from the source, without importing anything (so the test needs
no framework and takes well under a second). An edge is any of:

* an ``import`` / ``from ... import`` statement anywhere in a module: at the top, inside a
  function (a function-level import is a dependency too, it only runs later), and the
  relative forms (``from . import x``, ``from ..pkg import y``); ``from package import name``
  is an edge to ``package.name`` when that is a module, else to the package;
* ``importlib.import_module("hyper_parallel....")`` with a literal name;
* for the layer rules only (*deferred* edges): an import under ``if TYPE_CHECKING:`` and a lazy
  reference ``"hyper_parallel.<module>:<qualname>"`` (``protocols.lazy.LazyRef`` /
  ``LazyOwner``, imported when the reference is used). Both are real dependencies, so they
  must point down too; but neither runs while the modules load, so neither can close an
  import cycle, and the pattern both exist for is one: a torch-free ``Config`` naming (for the
  type checker, or to build it) the torch class that owns it, whose module imports the Config.
  The foundations (:data:`NO_DEFERRED_CYCLES`) have no such circle either: their graph has no
  cycle even with the deferred edges.

Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those implicit parent imports
are not edges (every submodule of a package would otherwise form a cycle with an ``__init__``
that re-exports it). Names computed at run time (the platform registry, model-spec discovery,
``--module`` recipes, the old paths of moved modules, ``utils.moved_modules``) are
configuration, not dependencies, and are not followed.

Violations that belong to other owners are listed in :data:`KNOWN_CYCLES` and
:data:`KNOWN_LAYER_VIOLATIONS`, each with a strict xfail test: when one is fixed, its xfail
passes and fails the suite until the entry is deleted, so the lists can only shrink.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from pathlib import Path

import pytest

PACKAGE = "hyper_parallel"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: Layer -> the layers it must not import.
FORBIDDEN: dict[str, frozenset[str]] = {
    "utils": frozenset(
        {"models", "data", "runtime", "components", "trainer", "config", "codegen"}
    ),
    "platform": frozenset(
        {"models", "data", "runtime", "components", "trainer", "config", "codegen"}
    ),
    "protocols": frozenset(
        {"models", "data", "runtime", "components", "trainer", "config", "codegen"}
    ),
    "models": frozenset({"runtime", "components", "trainer", "config", "codegen"}),
    "data": frozenset({"runtime", "components", "trainer", "config", "codegen"}),
    "runtime": frozenset({"components", "trainer", "config", "codegen"}),
    # Not even the legacy schema (trainer.config): the components read only their own Configs.
    "components": frozenset({"trainer", "codegen"}),
}
# The planner (issue 47) sits above preflight and launch, which it imports: nothing below it
# imports it.
for _layer in ("utils", "platform", "protocols", "models", "data", "runtime", "components",
               "trainer", "config", "codegen", "preflight", "launch"):
    FORBIDDEN[_layer] = FORBIDDEN.get(_layer, frozenset()) | {"plan"}

#: Modules whose layer is not their package's. ``models/<m>/config_registry.py`` are the
#: generated recipe modules of a model (``--module <m>``): they live in the model's package so
#: that the model name finds them, but each recipe returns a whole ``HyperTrainer.Config`` (the
#: trainer's config tree over every component's Config), so they sit at the top, with the
#: recipes of ``config/``.
LAYER_OVERRIDES: dict[str, str] = {
    f"{PACKAGE}.models.qwen3_5_v2.config_registry": "config",
    f"{PACKAGE}.models.qwen3_5_moe.config_registry": "config",
}

#: Import cycles (as the set of modules of one strongly connected component) that other owners
#: still have to break; the integrator empties this list.
KNOWN_CYCLES: dict[frozenset[str], str] = {}

#: ``(importer, imported)`` edges that break a layer rule, owned elsewhere; same contract.
KNOWN_LAYER_VIOLATIONS: dict[tuple[str, str], str] = {}

#: Layers whose modules form no cycle even through deferred edges: the foundations every other
#: layer builds on, where a module that names its user (``protocols.model_config`` naming
#: ``Module``, which imports it) would be the one circle. Their package ``__init__`` is above
#: their modules: it may name them (``protocols`` gives the base Configs their lazy owners).
NO_DEFERRED_CYCLES: tuple[str, ...] = ("utils", "platform", "protocols")

#: The code generator's stages, one subpackage of ``codegen/`` each, in pipeline order: the field
#: table and descriptors read and checked, the generated files rendered from them, the legacy
#: YAMLs migrated to recipes (with the rendering's templates and black). A stage imports only
#: the stages before it and ``codegen.errors`` (below them all); the modules at the top of
#: ``codegen/`` (:data:`CODEGEN_DRIVERS`) drive them all.
CODEGEN_STAGES: tuple[str, ...] = ("table", "rendering", "migration")
CODEGEN = f"{PACKAGE}.codegen"
CODEGEN_BOTTOM = f"{CODEGEN}.errors"
CODEGEN_DRIVERS: frozenset[str] = frozenset(
    {CODEGEN, f"{CODEGEN}.__main__", f"{CODEGEN}.pipeline", f"{CODEGEN}.staleness"}
)

_LAZY_REF = re.compile(rf"^({re.escape(PACKAGE)}(?:\.\w+)+):[\w.]+$")


@functools.cache
def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package ``__init__``)."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _known_module(name: str) -> str | None:
    """``name`` if it is a module of the package, else its longest prefix that is one."""
    modules = _modules()
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(tree: ast.AST):
    """``(node, deferred)`` for every node of ``tree``; ``deferred``: under ``if TYPE_CHECKING:``."""
    todo = [(tree, False)]
    while todo:
        node, deferred = todo.pop()
        yield node, deferred
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend((child, True) for child in node.body)
            todo.extend((child, deferred) for child in node.orelse)
            continue
        todo.extend((child, deferred) for child in ast.iter_child_nodes(node))


def _import_targets(node: ast.AST, package: str) -> list[tuple[str, bool]]:
    """``(module, deferred)`` for each package module one AST node imports (``package``: the
    importer's package; ``deferred``: a lazy reference)."""
    modules = _modules()
    if isinstance(node, ast.Import):
        return [(alias.name, False) for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base_parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        targets = []
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            targets.append((submodule if submodule in modules else base, False))
        return targets
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name == "import_module" and isinstance(node.args[0].value, str):
            return [(node.args[0].value, False)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        match = _LAZY_REF.match(node.value)
        if match:
            return [(match.group(1), True)]
    return []


@functools.cache
def _edges() -> dict[str, list[tuple[str, int, bool]]]:
    """importer -> ``(imported module, line, deferred)`` for every import in it."""
    found: dict[str, list[tuple[str, int, bool]]] = {}
    for module, (path, is_package) in _modules().items():
        package = module if is_package else module.rpartition(".")[0]
        edges = found[module] = []
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, type_only in _nodes(tree):
            for target, lazy in _import_targets(node, package):
                if target != PACKAGE and not target.startswith(f"{PACKAGE}."):
                    continue
                resolved = _known_module(target)
                if resolved is not None and resolved != module:
                    edges.append((resolved, getattr(node, "lineno", 0), type_only or lazy))
    return found


@functools.cache
def import_graph(deferred: bool = False) -> dict[str, dict[str, int]]:
    """importer -> {imported module: line of the first import of it}; with ``deferred``, the
    ``TYPE_CHECKING`` imports and lazy references are edges too."""
    graph: dict[str, dict[str, int]] = {}
    for module, edges in _edges().items():
        graph[module] = {}
        for target, line, is_deferred in edges:
            if deferred or not is_deferred:
                graph[module][target] = min(graph[module].get(target, line), line)
    return graph


def strongly_connected_components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def a_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """One concrete cycle through the component's first module (breadth-first, shortest)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{component} is not strongly connected")


def _describe_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    cycle = a_cycle(graph, component)
    hops = [f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(cycle)]
    return " -> ".join([*hops, cycle[-1]])


def layer_of(module: str) -> str:
    """The layer of a module: its first subpackage (``entry`` for the root and train.py)."""
    if module in LAYER_OVERRIDES:
        return LAYER_OVERRIDES[module]
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "train":
        return "entry"
    return parts[1]


def layer_violations(graph: dict[str, dict[str, int]]) -> dict[tuple[str, str], str]:
    """``(importer, imported)`` -> a line saying which rule the edge breaks."""
    found = {}
    for module, edges in sorted(graph.items()):
        source = layer_of(module)
        for target, line in sorted(edges.items()):
            if layer_of(target) in FORBIDDEN.get(source, ()):
                path = _modules()[module][0].relative_to(ROOT.parent)
                found[(module, target)] = (
                    f"{path}:{line} imports {target} ({source} may not import "
                    f"{layer_of(target)})"
                )
    return found


def codegen_stage_of(module: str) -> int:
    """A codegen module's place in the pipeline: -1 for ``codegen.errors``, the index of its
    stage in :data:`CODEGEN_STAGES`, ``len(CODEGEN_STAGES)`` for a driver."""
    if module == CODEGEN_BOTTOM:
        return -1
    if module in CODEGEN_DRIVERS:
        return len(CODEGEN_STAGES)
    return CODEGEN_STAGES.index(module[len(CODEGEN) + 1:].split(".")[0])


def codegen_stage_violations(graph: dict[str, dict[str, int]]) -> list[str]:
    """One line per import from a codegen stage to a later stage (or to a driver)."""
    found = []
    for module, edges in sorted(graph.items()):
        if not module.startswith(f"{CODEGEN}.") and module != CODEGEN:
            continue
        for target, line in sorted(edges.items()):
            if target.startswith(f"{CODEGEN}.") and (
                codegen_stage_of(target) > codegen_stage_of(module)
            ):
                path = _modules()[module][0].relative_to(ROOT.parent)
                found.append(f"{path}:{line} imports {target} (a later stage of the generator)")
    return found


# ------------------------------------------------------------------------------------------
# the rules
# ------------------------------------------------------------------------------------------


def test_the_module_graph_has_no_cycles():
    graph = import_graph()
    new = [
        _describe_cycle(graph, component)
        for component in strongly_connected_components(graph)
        if frozenset(component) not in KNOWN_CYCLES
    ]
    assert not new, "import cycles:\n  " + "\n  ".join(new)


def test_the_foundations_have_no_cycle_even_through_deferred_imports():
    """A ``TYPE_CHECKING`` import or a lazy reference cannot close a cycle at import time, but
    inside :data:`NO_DEFERRED_CYCLES` it is a circle all the same: one of the two modules is
    not below the other."""
    graph = import_graph(deferred=True)
    new = []
    for layer in NO_DEFERRED_CYCLES:
        inside = {
            module: {t: line for t, line in edges.items() if layer_of(t) == layer}
            for module, edges in graph.items()
            if layer_of(module) == layer
        }
        new += [_describe_cycle(inside, c) for c in strongly_connected_components(inside)]
    assert not new, "deferred import cycles:\n  " + "\n  ".join(new)


def test_every_layer_imports_only_layers_below_it():
    new = [
        text
        for edge, text in layer_violations(import_graph(deferred=True)).items()
        if edge not in KNOWN_LAYER_VIOLATIONS
    ]
    assert not new, "imports that point up:\n  " + "\n  ".join(new)


def test_every_codegen_module_has_a_stage():
    """Each module of ``codegen/`` belongs to one stage, is a driver or is ``codegen.errors``: a
    new module at the top of the package is placed consciously."""
    unplaced = []
    for module in _modules():
        if module == CODEGEN or module.startswith(f"{CODEGEN}."):
            try:
                codegen_stage_of(module)
            except ValueError:
                unplaced.append(module)
    assert unplaced == []


def test_the_codegen_stages_import_only_earlier_stages():
    """table <- rendering <- migration <- the drivers (pipeline, staleness, the command line)."""
    assert codegen_stage_violations(import_graph(deferred=True)) == []
    graph = import_graph()
    # The order is real, not vacuous: each stage uses the one before it.
    assert f"{CODEGEN}.table.coverage" in graph[f"{CODEGEN}.rendering.sections_context"]
    assert f"{CODEGEN}.rendering.render" in graph[f"{CODEGEN}.migration.recipe.comments"]
    assert f"{CODEGEN}.migration.from_yaml" in graph[f"{CODEGEN}.pipeline"]
    upward = {f"{CODEGEN}.table.coverage": {f"{CODEGEN}.rendering.render": 7}}
    expected = (f"hyper_parallel/codegen/table/coverage.py:7 imports {CODEGEN}.rendering.render"
                " (a later stage of the generator)")
    assert codegen_stage_violations(upward) == [expected]


@pytest.mark.xfail(strict=True, reason="a known cycle, owned elsewhere (KNOWN_CYCLES)")
@pytest.mark.parametrize(
    "cycle", sorted(KNOWN_CYCLES, key=sorted), ids=lambda c: " <-> ".join(sorted(c))
)
def test_known_cycle_is_still_there(cycle):
    """Fails (XPASS, strict) once the cycle is gone: then delete its KNOWN_CYCLES entry."""
    components = {frozenset(c) for c in strongly_connected_components(import_graph())}
    assert cycle not in components, KNOWN_CYCLES[cycle]


@pytest.mark.xfail(strict=True, reason="a known layer violation, owned elsewhere")
@pytest.mark.parametrize(
    "edge", sorted(KNOWN_LAYER_VIOLATIONS), ids=lambda e: f"{e[0]} -> {e[1]}"
)
def test_known_layer_violation_is_still_there(edge):
    """Fails (XPASS, strict) once the edge is gone: then delete its KNOWN_LAYER_VIOLATIONS
    entry."""
    assert edge not in layer_violations(import_graph(deferred=True)), KNOWN_LAYER_VIOLATIONS[edge]


# ------------------------------------------------------------------------------------------
# the reader itself
# ------------------------------------------------------------------------------------------


def test_the_reader_sees_every_kind_of_import():
    graph = import_graph()
    # Relative, from a package's submodule to a sibling package: ``from .. import checkpoint``.
    assert f"{PACKAGE}.runtime.checkpoint" in graph[f"{PACKAGE}.runtime.callbacks.components"]
    # Relative ``from .base import ...`` inside a package __init__.
    assert f"{PACKAGE}.runtime.callbacks.base" in graph[f"{PACKAGE}.runtime.callbacks"]
    # Function-level: the legacy schema's parse_args imports the parser's parts when called.
    assert f"{PACKAGE}.trainer.legacy_parsing.load" in graph[f"{PACKAGE}.trainer.config"]
    # ``from package import module`` is an edge to the module.
    assert f"{PACKAGE}.trainer.legacy_parsing.show" in graph[f"{PACKAGE}.trainer.config_parser"]
    # Deferred: a lazy reference (HyperTrainer.Config names the engine that builds it) and a
    # TYPE_CHECKING import (the protocol package names the framework classes it exports lazily).
    deferred = import_graph(deferred=True)
    engine, config = f"{PACKAGE}.trainer.hyper_trainer", f"{PACKAGE}.trainer.trainer_config"
    assert engine in deferred[config] and engine not in graph[config]
    owner, package = f"{PACKAGE}.protocols.module", f"{PACKAGE}.protocols"
    assert owner in deferred[package] and owner not in graph[package]


def test_a_cycle_is_reported_by_module_names():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}}
    assert strongly_connected_components(graph) == [["a", "b", "c"]]
    assert _describe_cycle(graph, ["a", "b", "c"]) == "a (line 1) -> b (line 2) -> c (line 3) -> a"


def test_the_known_lists_name_real_modules():
    modules = _modules()
    named = {m for cycle in KNOWN_CYCLES for m in cycle}
    named |= {m for edge in KNOWN_LAYER_VIOLATIONS for m in edge} | set(LAYER_OVERRIDES)
    assert sorted(named - set(modules)) == []


# ------------------------------------------------------------------------------------------
# a package's names
# ------------------------------------------------------------------------------------------


def _module_level(body: list[ast.stmt]):
    """The statements that run when a module loads: its body and what ``if`` / ``try`` /
    ``with`` blocks hold, not function or class bodies."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.With | ast.For | ast.While):
            yield from _module_level(node.body + node.orelse if hasattr(node, "orelse")
                                     else node.body)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(handler.body for handler in node.handlers)):
                yield from _module_level(block)


def package_bindings(package: str, tree: ast.Module) -> list[tuple[str, int, str | None]]:
    """``(name, line, module)`` for every name a package's ``__init__`` binds: ``module`` is the
    module the name is bound to (``from . import x``, ``import a.b as x``), ``None`` for any
    other object (a def, a class, an assignment, a name imported from a module, a lazy export
    of :func:`hyper_parallel.protocols.lazy.lazy_exports`)."""
    found: list[tuple[str, int, str | None]] = []
    dicts: dict[str, ast.Dict] = {}
    for node in _module_level(tree.body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((node.name, node.lineno, None))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found.append((alias.asname, node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)]
                                + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.append((alias.asname or alias.name, node.lineno,
                              target if target in _modules() else None))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found.append((name.id, node.lineno, None))
            if isinstance(node.value, ast.Dict):
                dicts.update({t.id: node.value for t in targets if isinstance(t, ast.Name)})
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and len(node.args) == 3
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "lazy_exports"):
            names = node.args[2]
            names = dicts.get(names.id) if isinstance(names, ast.Name) else names
            if isinstance(names, ast.Dict):
                found += [(key.value, node.lineno, None) for key in names.keys
                          if isinstance(key, ast.Constant) and isinstance(key.value, str)]
    return found


def names_shadowing_submodules(package: str, tree: ast.Module,
                               submodules: set[str]) -> list[tuple[str, int]]:
    """``(name, line)`` for each name the package binds to something other than its submodule
    of that name."""
    return sorted({(name, line) for name, line, module in package_bindings(package, tree)
                   if name in submodules and module != f"{package}.{name}"})


def test_no_package_name_is_one_of_its_submodules_names():
    """A package that binds a submodule's name to something else (``from .report import
    report``) makes ``package.report`` the function or the module depending on what was
    imported first, and ``import package.report as m`` hands out the function."""
    modules = _modules()
    found = []
    for package, (path, is_package) in sorted(modules.items()):
        if not is_package:
            continue
        submodules = {m.rpartition(".")[2] for m in modules if m.rpartition(".")[0] == package}
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += [f"{path.relative_to(ROOT.parent)}:{line} binds {name!r}, the name of the "
                  f"submodule {package}.{name}"
                  for name, line in names_shadowing_submodules(package, tree, submodules)]
    assert not found, "names that shadow a submodule:\n  " + "\n  ".join(found)


def test_the_shadow_reader_sees_every_kind_of_binding():
    package = f"{PACKAGE}.codegen.migration.fleet"  # a real package: ``.report`` resolves
    source = """
from hyper_parallel.codegen.migration.fleet.report import report
from . import model
from .plan import plan as plan
import hyper_parallel.codegen.migration.fleet.text as text
import hyper_parallel.codegen.migration.fleet.text as convert
def inputs(): ...
if True:
    class __main__: ...
_LAZY = {"model": "x.y"}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
lazy_exports(__name__, globals(), {"text": "x.y"})
"""
    submodules = {"report", "model", "plan", "text", "convert", "inputs", "__main__"}
    assert names_shadowing_submodules(package, ast.parse(source), submodules) == [
        ("__main__", 9), ("convert", 6), ("inputs", 7), ("model", 11), ("plan", 4),
        ("report", 2), ("text", 12),
    ]
