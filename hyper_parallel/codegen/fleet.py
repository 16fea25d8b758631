"""Fleet migration: several legacy YAMLs become one registry module, proven before it is written.

``python -m hyper_parallel.codegen --from-yaml a.yaml b.yaml dir/`` (a folder stands for its
``*.yaml`` / ``*.yml`` files in name order) writes one module in the ``config_registry.py``
style (default ``recipes/config_registry.py``):

1. Every YAML is read, canonicalised and converted as in :mod:`.from_yaml` (its *target*), and
   gets its own baseline (:func:`~.from_yaml.choose_baseline`). Overrides after ``--`` apply to
   every file.
2. The planner (:func:`plan_hierarchy`, a pure function over sets of changes) groups the files
   by baseline -- only files on the same baseline can share a function -- and builds, in each
   group, a tree of shared functions (*families*): a family sets what all the files below it
   agree on beyond what it calls (its group's baseline or a larger family), and a file whose
   settings are exactly what several others share serves itself: they call its recipe. Families
   are formed greedily while they save lines (``FAMILY_COST``); the top-level family with the
   most YAMLs is ``<prefix>_base``, the others ``<prefix>_<members>_shared`` (or
   ``<prefix>_shared_<k>``).
3. Each function sets, one line each, the fields where it differs from what it calls: a
   recipe's lines are commented with ``name.yaml:LINE legacy.key`` (``command line: --a.b=c`` for
   an override) and the YAML's own comments; a family's lines say which key they come from and
   how many YAMLs share it, and carry the YAMLs' comments on that key (once each).
4. The module is rendered from ``templates/registry_from_yaml.py.j2``, formatted by black, and
   :func:`~.from_yaml.prove_module` executes it once and checks every recipe against its YAML;
   nothing is written unless every recipe proves.

:func:`line_counts` compares the module's length with the single-file conversions of the same
YAMLs (``python -m hyper_parallel.codegen.fleet examples/yaml`` prints it).
"""

from __future__ import annotations

import copy
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen import from_yaml as fy
from hyper_parallel.codegen import launch as launch_mod
from hyper_parallel.codegen.errors import CodegenError

TEMPLATE = "registry_from_yaml.py.j2"
DEFAULT_OUTPUT = Path("recipes") / "config_registry.py"
#: What a new shared function costs the planner, in lines, besides its assignments: it is only
#: written when it saves more repeated lines than that. It is less than the module lines a
#: function takes (``def``, docstring, first line, ``return``, blank lines) because a line
#: repeated across recipes is worse than one more function: with 2, two files get a family for
#: 3 shared lines, three files for 2, four or more for 1.
FAMILY_COST = 2
SUFFIXES = (".yaml", ".yml")


# ---------------------------------------------------------------------------------------------
# the inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """One YAML to convert: its path, the overrides applied on top, the launch command (if the
    YAML came from one)."""

    path: Path
    overrides: tuple[str, ...] = ()
    launch: launch_mod.Launch | None = None


@dataclass
class Inputs:
    """What ``--from-yaml`` was given, resolved to files."""

    files: list[Input]
    arguments: list[str]
    """The ``--from-yaml`` arguments as the written command shows them."""
    extra: tuple[str, ...] = ()
    """The overrides after ``--`` (applied to every file)."""
    folders: bool = False
    """Whether a folder was given (then the result is a registry, even of one file)."""
    dash_launch: launch_mod.Launch | None = None
    """The launch command given after ``--`` (``--from-yaml -- torchrun ...``)."""

    @property
    def single(self) -> bool:
        """One YAML, no folder: the single-file conversion of :mod:`.from_yaml`."""
        return len(self.files) == 1 and not self.folders

    def command(self) -> str:
        """The command line that converts these inputs."""
        text = "python -m hyper_parallel.codegen --from-yaml"
        if self.dash_launch is not None:
            return f"{text} -- {self.dash_launch.text}"
        text += "".join(f" {shlex.quote(a)}" for a in self.arguments)
        return text + (f" -- {shlex.join(self.extra)}" if self.extra else "")


def _has_space(text: str) -> bool:
    return any(c.isspace() for c in text)


def resolve_inputs(values: list[str], after_dash: list[str] | tuple[str, ...] = (),
                   base: Path | None = None) -> Inputs:
    """Resolve the ``--from-yaml`` values and the tokens after ``--``.

    A value is a YAML file, a folder (its ``*.yaml`` / ``*.yml`` files, in name order) or -- when
    no such path exists and it holds spaces -- a launch command (:mod:`.launch`). With values,
    the tokens after ``--`` are overrides for every file; without, they are a launch command.
    """
    after_dash = tuple(after_dash)
    if not values:
        if not after_dash:
            raise CodegenError("--from-yaml needs a YAML, a folder of YAMLs, or the launch "
                               "command that trained one (after --)")
        launch = launch_mod.parse(after_dash)
        return Inputs([Input(Path(launch.yaml), launch.overrides, launch)], [],
                      dash_launch=launch)
    files: list[Input] = []
    arguments: list[str] = []
    folders = False
    for value in values:
        path = Path(value)
        if path.is_dir():
            found = sorted((p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file()),
                           key=lambda p: p.name)
            if not found:
                raise CodegenError(f"{fy.display_path(path, base)}: the folder holds no *.yaml "
                                   "or *.yml file")
            folders = True
            files += [Input(p, after_dash) for p in found]
            arguments.append(fy.display_path(path, base))
        elif path.exists() or not _has_space(value):
            files.append(Input(path, after_dash))
            arguments.append(fy.display_path(path, base) if path.exists() else value)
        else:
            launch = launch_mod.parse(launch_mod.split(value))
            files.append(Input(Path(launch.yaml), launch.overrides + after_dash, launch))
            arguments.append(launch.text)
    return Inputs(files, arguments, after_dash, folders)


def recipe_names(files: list[Input], base: Path | None = None) -> list[str]:
    """The recipe name of each file (its file name without the suffix); a name that is not a
    usable function name, or two files with the same name, are a CodegenError with the fix."""
    names, problems = [], []
    for item in files:
        stem = item.path.name.rsplit(".", 1)[0] if "." in item.path.name else item.path.name
        problem = fy.name_problem(stem)
        if problem is not None:
            problems.append(f"recipe name {stem!r} (from the file name {item.path.name!r}) "
                            f"{problem[0]}; rename the file (e.g. to {problem[1]}.yaml): with "
                            "several YAMLs each recipe is named after its file")
        names.append(stem)
    by_name: dict[str, list[Input]] = {}
    for name, item in zip(names, files):
        by_name.setdefault(name, []).append(item)
    for name, items in by_name.items():
        if len(items) > 1:
            shown = [fy.display_path(i.path, base) for i in items]
            same = len({i.path.resolve() for i in items}) < len(items)
            problems.append(
                f"{len(items)} YAMLs would become the recipe {name!r}: {', '.join(shown)}"
                + (" (the same file is given twice)" if same else "")
                + "; recipe names come from the file names, so rename all but one (e.g. "
                + ", ".join(f"{Path(s).parent.name or 'other'}_{name}.yaml" for s in shown[1:])
                + ")")
    if problems:
        raise CodegenError(problems)
    return names


def base_name(names: list[str], taken: set[str]) -> str:
    """``<common prefix of the names>_base`` (by ``_``-separated words; ``base`` when they share
    none), never one of ``names`` or ``taken``."""
    stem = _name_stem(names)
    blocked = set(names) | set(taken) | fy.RESERVED_NAMES
    found = _free([f"{stem}base", f"{stem}shared"] + [f"{stem}base_{i}" for i in range(2, 100)],
                  blocked)
    if found is None:  # 100 names taken: not reachable
        raise CodegenError("no free name for the base recipe")
    return found


def _name_stem(names: list[str]) -> str:
    """The common ``_``-separated prefix of ``names`` with its trailing ``_`` ("" for none)."""
    common: list[str] = []
    for group in zip(*(n.split("_") for n in names)):
        if len(set(group)) != 1 or not group[0]:
            break
        common.append(group[0])
    return "_".join(common) + "_" if common else ""


def _free(candidates: list[str], blocked: set[str]) -> str | None:
    return next((c for c in candidates if fy.name_problem(c) is None and c not in blocked), None)


def family_names(names: list[str], members: list[list[str]], base: int | None,
                 taken: set[str]) -> list[str]:
    """A name per family: ``base`` (an index, or None) gets :func:`base_name`; the others
    ``<prefix>_<member suffixes>_shared`` when they have at most 3 members (``members``: the
    names each family is named after), else ``<prefix>_shared_<k>``. Never a recipe name, an
    import, a reserved name or another family's."""
    stem = _name_stem(names)
    blocked = set(names) | set(taken) | fy.RESERVED_NAMES
    found: list[str | None] = [None] * len(members)
    if base is not None:
        found[base] = base_name(names, taken)
        blocked.add(found[base])
    counter = 0
    for index, group in enumerate(members):
        if found[index] is not None:
            continue
        suffixes = [n[len(stem):] for n in group]
        candidates = []
        if len(group) <= 3 and all(suffixes):
            candidates.append(f"{stem}{'_'.join(suffixes)}_shared")
        name = _free(candidates, blocked)
        while name is None:
            counter += 1
            name = _free([f"{stem}shared_{counter}"], blocked)
            if counter > 10_000:  # pragma: no cover -- 10,000 names taken: not reachable
                raise CodegenError("no free name for a shared function")
        found[index] = name
        blocked.add(name)
    return [n for n in found if n is not None]


# ---------------------------------------------------------------------------------------------
# the plan: who calls whom
# ---------------------------------------------------------------------------------------------


@dataclass
class FleetRecipe:
    """One YAML of the fleet: its conversion, and where the plan puts it."""

    name: str
    source: fy.LegacySource
    canonical: Any
    target: Any
    normalisations: list
    own: fy.Baseline
    launch: Any = None
    warnings: list[str] = field(default_factory=list)
    parent: str = ""
    """The call its first line makes: a shared function's, another recipe's, or its baseline's."""
    goal: Any = None
    """What the recipe builds: ``target`` on the spec of its baseline."""
    head: fy.RecipeLine | None = None
    lines: list[fy.RecipeLine] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    doc: str = ""
    keys_written: int = 0
    keys_mapped: int = 0
    unmapped: list[str] = field(default_factory=list)


def apply_changes(config: Any, changes: list[fy.Change]) -> Any:
    """A copy of ``config`` with ``changes`` made (the model spec is shared, not copied)."""
    spec = getattr(config, "model_spec", None)
    config = copy.deepcopy(config, {id(spec): spec} if spec is not None else None)
    for change in changes:
        node = config
        for kind, step in change.path[:-1]:
            node = getattr(node, step) if kind == "attr" else node[step]
        kind, step = change.path[-1]
        if change.delete:
            del node[step]
        elif kind == "attr":
            setattr(node, step, copy.deepcopy(change.value))
        else:
            node[step] = copy.deepcopy(change.value)
    return config


def item_key(change: fy.Change) -> tuple:
    """A hashable stand-in for ``change``: two changes have the same key when they set the same
    path to the same value (``from_yaml._same``: the same type and an equal value), so that they
    are the same line."""
    return (change.path, change.delete, type(change.value).__qualname__, repr(change.value))


@dataclass(frozen=True)
class Hierarchy:
    """The planner's tree over one group of files (one baseline): node ``i`` for ``i < files``
    is the ``i``-th file, the nodes after them the new shared functions (*families*), in the
    order they were formed. ``parent[node]`` is the node it calls (None: the baseline); a file
    can be a parent (the others call its recipe); every node sets ``items[node] -
    items[parent]``."""

    files: int
    items: tuple[frozenset, ...]
    parent: tuple[int | None, ...]

    @property
    def families(self) -> range:
        return range(self.files, len(self.items))

    def inherited(self, node: int) -> frozenset:
        """What the node starts from: its parent's items (none on the baseline)."""
        parent = self.parent[node]
        return frozenset() if parent is None else self.items[parent]

    def lines(self, node: int) -> frozenset:
        """The items the node sets itself."""
        return self.items[node] - self.inherited(node)

    def children(self, node: int) -> list[int]:
        return [n for n, p in enumerate(self.parent) if p == node]

    def ancestors(self, node: int) -> list[int]:
        """The nodes above ``node``, nearest first."""
        found = []
        while self.parent[node] is not None:
            node = self.parent[node]
            found.append(node)
        return found

    def below(self, node: int) -> list[int]:
        """The files that call ``node``, directly or through other nodes (itself when a file),
        in file order."""
        return sorted(n for n in range(self.files) if n == node or node in self.ancestors(n))

    def cost(self, family_cost: int = FAMILY_COST) -> int:
        """The assignments written, plus ``family_cost`` per family."""
        return sum(len(self.lines(n)) for n in range(len(self.items))) + \
            family_cost * (len(self.items) - self.files)


def plan_hierarchy(item_sets: list[frozenset] | list[set], family_cost: int = FAMILY_COST
                   ) -> Hierarchy:
    """The tree of shared functions over files on one baseline, each given as the set of its
    items (hashable changes relative to that baseline), in file order.

    Deterministic greedy agglomeration. A *scope* is the baseline or a node with two or more
    children; among the children of a scope, for each pair ``a``, ``b``: ``T = items(a) &
    items(b)``, ``F`` = the children holding all of ``T`` (then ``T`` is exactly what they
    share). Hanging ``F`` under one node with items ``T`` -- a member whose items are ``T`` (its
    recipe serves, no new function) or a new family -- saves ``(|F| - 1) * |T - items(scope)|``
    lines, less ``family_cost`` for a new family. The best positive saving is taken (ties: the
    larger ``F``, the larger ``T``, the earlier files), until none is left. Families thus form
    above existing ones (the baseline's scope) and inside them (a family's children)."""
    items: list[frozenset] = [frozenset(s) for s in item_sets]
    files = len(items)
    parent: list[int | None] = [None] * files
    first = list(range(files))  # the earliest file at or below each node: the order
    while True:
        children: dict[int | None, list[int]] = {}
        for node in sorted(range(len(items)), key=lambda n: first[n]):
            children.setdefault(parent[node], []).append(node)
        best: tuple | None = None
        for scope, members in children.items():
            above = frozenset() if scope is None else items[scope]
            seen: set[tuple[int, ...]] = set()
            for position, a in enumerate(members):
                for b in members[position + 1:]:
                    shared = items[a] & items[b]
                    if not shared - above:
                        continue
                    group = tuple(m for m in members if items[m] >= shared)
                    if group in seen:
                        continue
                    seen.add(group)
                    shared = frozenset.intersection(*(items[m] for m in group))
                    server = next((m for m in group if items[m] == shared), None)
                    saving = (len(group) - 1) * len(shared - above) - (
                        0 if server is not None else family_cost)
                    if saving <= 0:
                        continue
                    key = (-saving, -len(group), -len(shared), [first[m] for m in group])
                    if best is None or key < best[0]:
                        best = (key, scope, group, shared, server)
        if best is None:
            break
        _, scope, group, shared, server = best
        if server is None:
            server = len(items)
            items.append(shared)
            parent.append(scope)
            first.append(min(first[m] for m in group))
        for m in group:
            if m != server:
                parent[m] = server
    return Hierarchy(files, tuple(items), tuple(parent))


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------


def _count_text(members: list[Any], total: list[Any]) -> str:
    """``all N YAMLs`` / ``N of M YAMLs``: the YAMLs that call a family."""
    if len(members) == len(total):
        return f"all {len(members)} YAMLs"
    return f"{len(members)} of {len(total)} YAMLs"


def _keys_text(keys: list[str]) -> str:
    if len(keys) == 1:
        return keys[0]
    parents = {k.rsplit(".", 1)[0] for k in keys}
    if len(parents) == 1:
        return f"{parents.pop()}.{{{', '.join(k.rsplit('.', 1)[1] for k in keys)}}}"
    return ", ".join(keys)


def _shared_provenance(keys: list[str], provs: list[Any], count: str,
                       what: str) -> tuple[str, float, tuple[tuple, ...]]:
    """The comment of a base line: the legacy keys, that ``count`` YAMLs share them, and their
    line when it is the same in every YAML."""
    located = [p.locate(keys) for p in provs]
    if all(not written and not cli for written, _, cli in located):
        if not keys:
            return (fy.comment_text(f"{what}: new-only, at its default in every legacy YAML"),
                    float("inf"), ())
        return (fy.comment_text(f"{what}: follows from the legacy default of {', '.join(keys)} "
                                f"and the other keys of {count}"), float("inf"), ())
    written_keys = [k for k in keys if any(k == key for w, _, _ in located for _, key in w)]
    cli: list[str] = []
    for _, _, found in located:
        cli += [text for _, text in found if text not in cli]
    spans = {(w[0][0], w[-1][0]) if w else None for w, _, _ in located}
    parts = []
    if written_keys:
        text = f"{_keys_text(written_keys)}: {count}"
        if len(spans) == 1 and None not in spans:
            first, last = spans.pop()
            text += f", line {first}" if first == last else f", lines {first}-{last}"
        parts.append(text)
    if cli:
        parts.append(f"command line: {' '.join(cli)}" + ("" if written_keys else f": {count}"))
    anchors = []
    paths: list[tuple] = []
    for written, overridden, found in located:
        lines = [line for line, _ in written + overridden]
        anchors.append(min(lines) if lines else fy.CLI_ANCHOR + (found[0][0] if found else 0))
        paths += [tuple(k.split(".")) for _, k in written + overridden
                  if tuple(k.split(".")) not in paths]
    return fy.comment_text(", ".join(parts)), min(anchors), tuple(paths)


def _head_anchor(source: fy.LegacySource) -> float:
    """Just below the YAML's first key: the comments above it (the file's header) go to the
    recipe's first line."""
    return min(source.lines.values()) + 0.5 if source.lines else 0


@dataclass
class FleetFamily:
    """A shared function: what the recipes below it agree on beyond what it calls."""

    name: str
    baseline: fy.Baseline
    """The baseline of its group (every recipe below it starts from it)."""
    files: list[str]
    """The recipes that call it, directly or through other functions, in file order."""
    parent: str = ""
    """The call its first line makes: its baseline's, another family's, or a recipe's."""
    head: fy.RecipeLine | None = None
    lines: list[fy.RecipeLine] = field(default_factory=list)
    doc: str = ""
    config: Any = None


@dataclass
class Fleet:
    """A converted fleet: the module text and what the report says about it."""

    text: str
    output: Path
    recipes: list[FleetRecipe]
    families: list[FleetFamily]
    """The shared functions, parents before children."""
    command: str
    base: str | None = None
    """The family named ``<prefix>_base`` (the top-level one with the most YAMLs), if any."""
    order: list[Any] = field(default_factory=list)
    """Every function (families and recipes) in module order."""
    proof_seconds: float = 0.0

    @property
    def line_count(self) -> int:
        return len(self.text.splitlines())

    def functions(self) -> list[Any]:
        """Every function the module defines, in its order."""
        return self.order or [*self.families, *self.recipes]

    def repeated(self) -> dict[str, list[str]]:
        """Each line that two or more functions set -> the functions setting it."""
        found: dict[str, list[str]] = {}
        for function in self.functions():
            for line in function.lines:
                found.setdefault(line.code, []).append(function.name)
        return {code: names for code, names in found.items() if len(names) > 1}

    def repeated_across_baselines(self) -> int:
        """How many of the repeated lines (counted as in the report: a line set ``k`` times is
        ``k - 1``) only repeat because their functions are on different baselines."""
        total = 0
        for names in self.repeated().values():
            codes = [self.baseline_of(n) for n in names]
            total += len(set(codes)) - 1
        return total

    def baseline_of(self, name: str) -> str:
        """The baseline call of the group the function ``name`` belongs to."""
        for function in self.functions():
            if function.name == name:
                return (function.baseline if isinstance(function, FleetFamily)
                        else function.own).code
        raise KeyError(name)


@dataclass
class _Node:
    """A node of the plan while rendering: a recipe (``recipe``) or a family (``family``)."""

    group: int
    items: frozenset
    parent: _Node | None
    files: list[int]
    """The indices of the recipes at or below it, in file order."""
    recipe: int | None = None
    family: FleetFamily | None = None
    children: list[_Node] = field(default_factory=list)

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()

    def ancestry(self) -> list[_Node]:
        """Its ancestors, the top-most first."""
        return [] if self.parent is None else self.parent.ancestry() + [self.parent]

    def order(self) -> tuple:
        """The pre-order position in its group's tree (children in file order)."""
        return (self.group,) + tuple(n.files[0] for n in self.ancestry() + [self])


def _plan_nodes(recipes: list[FleetRecipe], goals: list[Any]
                ) -> tuple[list[_Node], list[_Node], list[fy.Baseline]]:
    """Group the recipes by baseline, plan each group and return ``(recipe nodes, family
    nodes, the baseline of each group)``; family nodes parents first (pre-order, children in
    file order)."""
    codes = list(dict.fromkeys(r.own.code for r in recipes))
    baselines = [next(r.own for r in recipes if r.own.code == code) for code in codes]
    file_nodes: list[_Node | None] = [None] * len(recipes)
    family_nodes: list[_Node] = []
    for group, (code, baseline) in enumerate(zip(codes, baselines)):
        members = [i for i, r in enumerate(recipes) if r.own.code == code]
        item_sets = [frozenset(item_key(c) for c in fy.field_changes(baseline.config, goals[i]))
                     for i in members]
        tree = plan_hierarchy(item_sets)
        nodes: list[_Node] = []
        for node in range(len(tree.items)):
            files = [members[f] for f in tree.below(node)]
            nodes.append(_Node(group, tree.items[node], None, files,
                               recipe=members[node] if node < tree.files else None))
        for node, parent in enumerate(tree.parent):
            if parent is not None:
                nodes[node].parent = nodes[parent]
                nodes[parent].children.append(nodes[node])
        for node in nodes:
            node.children.sort(key=lambda n: n.files[0])
            if node.recipe is None:
                family_nodes.append(node)
            else:
                file_nodes[node.recipe] = node
    family_nodes.sort(key=_Node.order)
    return [n for n in file_nodes if n is not None], family_nodes, baselines


def _check_lines(node: _Node, changes: list[fy.Change], name: str) -> None:
    """The lines the renderer computed are the plan's (a planner bug otherwise)."""
    above = node.parent.items if node.parent is not None else frozenset()
    if {item_key(c) for c in changes} != node.items - above:
        raise CodegenError(f"{name}: the planned lines and the rendered ones differ (a bug in "
                           "hyper_parallel/codegen/fleet.py)")


def _call_of(node: _Node, recipes: list[FleetRecipe]) -> str:
    return f"{node.family.name if node.family is not None else recipes[node.recipe].name}()"


def _parent_text(parent: _Node, recipes: list[FleetRecipe], these: str) -> str:
    """The comment of a first line that calls ``parent`` (a family or another recipe)."""
    if parent.family is not None:
        return fy.comment_text(f"the settings shared by {_count_text(parent.files, recipes)}")
    return fy.comment_text(f"what {recipes[parent.recipe].name} sets: {these} all of its "
                           "settings")


def convert_fleet(inputs: Inputs | list[Path | str], output: Path | None = None,
                  repo: Path | None = None, strict: bool = False,
                  base: Path | None = None) -> Fleet:
    """Read, convert, plan, render and prove every input; writes nothing. ``output`` (default
    ``recipes/config_registry.py`` under ``base``) names the module in the ``torchrun`` lines;
    ``base`` as in :func:`~.from_yaml.convert`."""
    if not isinstance(inputs, Inputs):
        inputs = resolve_inputs([str(p) for p in inputs], (), base)
    repo = repo or Path(__file__).resolve().parents[2]
    output = Path(output) if output is not None else (base or Path()) / DEFAULT_OUTPUT
    names = recipe_names(inputs.files, base)
    recipes: list[FleetRecipe] = []
    refusals: list[str] = []
    for name, item in zip(names, inputs.files):
        source = fy.read_legacy(item.path, base, item.overrides)
        canonical, notes, target = fy.target_of(source)
        if strict and notes:
            refusals.append(str(fy.strict_error(source, notes)))
        own = fy.choose_baseline(canonical, target)
        written, mapped, unmapped = fy.key_counts(source)
        recipes.append(FleetRecipe(name, source, canonical, target, notes, own, item.launch,
                                   fy.launch_warnings(source, item.launch),
                                   keys_written=written, keys_mapped=mapped, unmapped=unmapped))
    if refusals:
        raise fy.ConversionError("\n".join(refusals))
    imported = {n for r in recipes for _, n in r.own.imports}
    clash = sorted(set(names) & imported)
    if clash:
        raise CodegenError(f"recipe name(s) {', '.join(clash)} are the names of registry recipes "
                           "the module imports as baselines; rename those files")
    for recipe in recipes:
        recipe.goal = fy._on_baseline_spec(recipe.target, recipe.own)
    file_nodes, family_nodes, baselines = _plan_nodes(recipes, [r.goal for r in recipes])

    # The families' names: the top-level one with the most YAMLs is the base.
    tops = [k for k, node in enumerate(family_nodes) if node.parent is None]
    base_index = min(tops, key=lambda k: (-len(family_nodes[k].files),
                                          family_nodes[k].files[0])) if tops else None
    # A family is named after its members: the recipes that call it directly and, for a family
    # among them, the recipes below that one.
    named_after = [[names[m] for m in sorted(m for c in node.children
                                             for m in ([c.recipe] if c.recipe is not None
                                                       else c.files))]
                   for node in family_nodes]
    for node, name in zip(family_nodes, family_names(names, named_after, base_index, imported)):
        node.family = FleetFamily(name, baselines[node.group], [names[i] for i in node.files])
    imports: set[tuple[str, str]] = {fy.TRAINER}
    provs = [fy._Provenance(r.source) for r in recipes]

    def config_of(node: _Node | None, group: int) -> Any:
        if node is None:
            return baselines[group].config
        return node.family.config if node.family is not None else recipes[node.recipe].goal

    # The families, parents first: their lines say which keys they come from and how many
    # YAMLs share them.
    for node in family_nodes:
        family = node.family
        below = [provs[i] for i in node.files]
        count = _count_text(node.files, recipes)
        baseline = family.baseline
        if node.parent is None:
            imports |= baseline.imports
            family.parent = baseline.code
            text, _, paths = _shared_provenance(list(baseline.keys), below, count, "baseline")
            family.head = fy.RecipeLine(f"config = {baseline.code}", text, 0, paths)
        else:
            family.parent = _call_of(node.parent, recipes)
            family.head = fy.RecipeLine(f"config = {family.parent}",
                                        _parent_text(node.parent, recipes, "they have"), 0)
        start = config_of(node.parent, node.group)
        first_changes = fy.field_changes(baseline.config, recipes[node.files[0]].goal)
        family.config = apply_changes(baseline.config, [c for c in first_changes
                                                        if item_key(c) in node.items])
        changes = fy.field_changes(start, family.config)
        _check_lines(node, changes, family.name)
        for change in changes:
            code = fy._code(change, imports)
            keys = below[0].legacy_keys(change)
            text, anchor, paths = _shared_provenance(keys, below, count, change.dotted)
            family.lines.append(fy.RecipeLine(code, text, anchor, paths))
        family.lines.sort(key=lambda line: (line.anchor, line.code))

    # The recipes, parents before children (the comments of a key an ancestor sets go to the
    # ancestor's line, after its own).
    module = fy.module_name_for(output, base) or f"<the module path of {output.name[:-3]}>"
    for node in sorted(file_nodes, key=lambda n: (n.depth(), n.recipe)):
        recipe, prov, parent = recipes[node.recipe], provs[node.recipe], node.parent
        if parent is None:
            imports |= recipe.own.imports
            recipe.parent = recipe.own.code
            base_keys = [k for k in recipe.own.keys if prov.line(k) is not None]
            text, anchor, paths = prov.describe(list(recipe.own.keys), "baseline")
            if not base_keys:
                text, anchor = fy.comment_text(recipe.own.described), 0
            recipe.head = fy.RecipeLine(f"config = {recipe.own.code}", text, anchor, paths)
        else:
            recipe.parent = _call_of(parent, recipes)
            recipe.head = fy.RecipeLine(f"config = {recipe.parent}",
                                        _parent_text(parent, recipes, "this YAML has"),
                                        _head_anchor(recipe.source))
        ancestors: list[fy.RecipeLine] = []
        for above in node.ancestry():
            function = above.family if above.family is not None else recipes[above.recipe]
            ancestors += [function.head] + function.lines
        changes = fy.field_changes(config_of(parent, node.group), recipe.goal)
        _check_lines(node, changes, recipe.name)
        recipe.lines = []
        for change in changes:
            code = fy._code(change, imports)
            text, anchor, paths = prov.describe(prov.legacy_keys(change), change.dotted)
            recipe.lines.append(fy.RecipeLine(code, text, anchor, paths))
        recipe.lines.sort(key=lambda line: (line.anchor, line.code))
        recipe.tail = fy._attach_comments(recipe.source, [recipe.head] + recipe.lines, ancestors)
        recipe.doc = _recipe_doc(recipe, module)
    families = [node.family for node in family_nodes]
    for node in family_nodes:
        node.family.doc = _family_doc(node, recipes)

    # The module order, parents before children: the families that start from a baseline or
    # another family, then the recipes in file order, each followed by the families that start
    # from it (when its settings are what several files share beyond it).
    def recipe_above(node: _Node) -> int | None:
        return next((n.recipe for n in reversed(node.ancestry()) if n.recipe is not None), None)

    order: list[Any] = [n.family for n in family_nodes if recipe_above(n) is None]
    for index, recipe in enumerate(recipes):
        order += [recipe] + [n.family for n in family_nodes if recipe_above(n) == index]

    command = inputs.command()
    functions = [{"name": f.name, "doc": f.doc, "head": f.head, "lines": f.lines,
                  "tail": getattr(f, "tail", [])} for f in order]
    context = {
        "docstring": _module_doc(recipes, [f.name for f in families], command, inputs.extra),
        "imports": fy._import_lines(imports),
        "exports": sorted(f["name"] for f in functions),
        "recipes": functions,
    }
    text = fy.render_template(repo, TEMPLATE, context, "module")
    fleet = Fleet(text, output, recipes, families, command,
                  families[base_index].name if base_index is not None else None, order)
    fleet.proof_seconds = fy.prove_module(
        text, str(output),
        [fy.Obligation(r.name, r.source.display, r.goal, r.canonical) for r in recipes],
        "_hyper_parallel_from_yaml_fleet_")
    return fleet


def _fill(text: str, indent: str = "", width: int = fy.LINE_LENGTH - 4) -> str:
    return textwrap.fill(text, width=width, break_on_hyphens=False,
                         break_long_words=False, initial_indent=indent, subsequent_indent=indent)


#: A function's docstring: its first line follows the 4 spaces and the quotes.
_FUNCTION_DOC_WIDTH = fy.LINE_LENGTH - 4 - 3


def _recipe_doc(recipe: FleetRecipe, module: str) -> str:
    nproc = fy.nproc_of(recipe.source.legacy, recipe.launch)
    overrides = (f" with {' '.join(recipe.source.overrides)}" if recipe.source.overrides else "")
    first = _fill(f"Converted from {recipe.source.display}{overrides}.",
                  width=_FUNCTION_DOC_WIDTH).replace("\n", "\n    ")
    return fy._docstring_text(
        f"{first}\n\n        torchrun --nproc_per_node {nproc} -m hyper_parallel.train --module "
        f"{module} --config {recipe.name}\n    ")


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _family_doc(node: _Node, recipes: list[FleetRecipe]) -> str:
    """One paragraph: who calls the family, what it starts from, how many fields it adds."""
    family = node.family
    if len(node.files) == len(recipes):
        who = f"all {len(recipes)} YAMLs"
    else:
        who = f"{_and(family.files)} ({len(node.files)} of the {len(recipes)} YAMLs)"
    count = len(family.lines)
    fields = f"the {count} field{'s' if count != 1 else ''} they agree on"
    if node.parent is None:
        start = f"{family.baseline.described}, and {fields}"
    elif node.parent.family is not None:
        start = f"what {node.parent.family.name} sets, and {fields} beyond it"
    else:
        start = (f"the settings of {recipes[node.parent.recipe].name}, which they all contain, "
                 f"and {fields} beyond them")
    direct = all(c.recipe is not None and not c.children for c in node.children)
    calls = ("Their recipes call it." if direct else
             "Their recipes call it, directly or through another function.")
    text = _fill(f"The settings shared by {who}: {start}. {calls}", width=_FUNCTION_DOC_WIDTH)
    return fy._docstring_text(text.replace("\n", "\n    ") + "\n    ")


def _module_doc(recipes: list[FleetRecipe], families: list[str], command: str,
                extra: tuple[str, ...]) -> str:
    head = (f"Recipes converted from {len(recipes)} legacy YAML{'s' if len(recipes) != 1 else ''}"
            ": one zero-argument function per YAML, each returning a fresh "
            "``HyperTrainer.Config`` (train one with ``--module M --config NAME``).")
    shown = [f"``{name}``" for name in families]
    if len(families) > 1:
        how = (f"What the YAMLs share is set once, in the shared functions {_and(shown)}: each "
               "holds what the recipes below it agree on, starting from a flavor baseline or "
               "from another of them. Each recipe calls one of them, the recipe of a YAML whose "
               "settings it contains, or the flavor baseline of its own model, ")
    elif families:
        how = (f"What the YAMLs share is set once, in {shown[0]}. Each recipe calls it, the "
               "recipe of a YAML whose settings it contains, or the flavor baseline of its own "
               "model, ")
    else:
        how = ("Each recipe calls the recipe of a YAML whose settings it contains, or the flavor "
               "baseline of its model, ")
    how += ("and sets, one line each, the fields where its YAML differs, commented with the "
            "legacy key and the line it comes from. Before writing, the converter executed this "
            "module, called every recipe and checked that each builds its YAML's configuration "
            "and converts back to the YAML's canonical form.")
    written = f"Written by ``{command}``."
    if extra:
        written += " The overrides after ``--`` apply to every YAML."
    sources = []
    for r in recipes:
        line = f"* ``{r.name}``: {r.source.display}"
        if r.source.overrides:
            line += f" with {' '.join(r.source.overrides)}"
        sources.append(_fill(line).replace("\n", "\n  ") + f"\n  (sha256 {r.source.sha256})")
    return fy._docstring_text("\n\n".join([_fill(head), _fill(how), _fill(written), "Sources:",
                                         "\n".join(sources)]) + "\n")


# ---------------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------------


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        cells = [cell.rjust(w) if c in right and n else cell.ljust(w)
                 for c, (cell, w) in enumerate(zip(row, widths))]
        out.append("  " + "  ".join(cells).rstrip())
        if n == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def report(fleet: Fleet, wrote: bool = True, base: Path | None = None) -> str:
    """The report printed after a fleet conversion: one table, a row per recipe."""
    rows = [["file", "recipe", "base", "lines", "normalisations", "proof"]]
    for family in fleet.families:
        rows.append(["(shared)", family.name, family.parent, str(len(family.lines)), "-", "-"])
    for r in fleet.recipes:
        rows.append([r.source.display, r.name, r.parent, str(len(r.lines)),
                     str(len(r.normalisations)), "ok"])
    count = len(fleet.recipes)
    lines = [f"from-yaml: {count} YAML{'s' if count != 1 else ''} -> "
             f"{fy.display_path(fleet.output, base)}"
             + ("" if wrote else " (not written)")]
    lines += _table(rows, {3, 4})
    repeated = fleet.repeated()
    extra = sum(len(names) - 1 for names in repeated.values())
    across = fleet.repeated_across_baselines()
    lines.append(f"  module: {fleet.line_count} lines; lines repeated across recipes: "
                 + (f"{extra}" if extra else "none")
                 + (f" ({across} between recipes on different baselines, which share no "
                    "function)" if across else ""))
    lines += [f"    {code}  ({', '.join(names)})" for code, names in repeated.items()]
    notes = [(r, n) for r in fleet.recipes for n in r.normalisations]
    if notes:
        lines.append(f"  normalisations ({len(notes)}):")
        lines += [f"    {r.name}: {n.field}: {n.old!r} -> {n.new!r} ({n.why})" for r, n in notes]
    lines.append("  proof: every recipe builds its YAML's config and converts back to "
                 "canonicalize(YAML): nothing lost")
    lines += [f"  warning: {w}" for r in fleet.recipes for w in r.warnings]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the line counts (make demo)
# ---------------------------------------------------------------------------------------------


def line_counts(paths: list[Path | str], repo: Path | None = None,
                base: Path | None = None) -> dict[str, Any]:
    """The fleet module's line count next to the sum of the single-file conversions' of the
    same YAMLs (each proven, nothing written)."""
    inputs = resolve_inputs([str(p) for p in paths], (), base)
    fleet = convert_fleet(inputs, repo=repo, base=base)
    per_file = {}
    for item in inputs.files:
        recipe, _ = fy.convert(item.path, repo=repo, base=base, overrides=item.overrides,
                               launch=item.launch)
        per_file[recipe.source.display] = len(recipe.text.splitlines())
    single = sum(per_file.values())
    return {"files": len(per_file), "module_lines": fleet.line_count, "single_lines": single,
            "ratio": round(fleet.line_count / single, 3) if single else None,
            "repeated_lines": sum(len(n) - 1 for n in fleet.repeated().values()),
            "repeated_across_baselines": fleet.repeated_across_baselines(),
            "families": [f.name for f in fleet.families],
            "per_file": per_file}


def main(argv: list[str] | None = None) -> int:
    """``python -m hyper_parallel.codegen.fleet YAML_OR_FOLDER ...``: print :func:`line_counts`."""
    import sys

    from hyper_parallel.trainer.config import ConfigError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m hyper_parallel.codegen.fleet YAML_OR_FOLDER ...", file=sys.stderr)
        return 2
    try:
        counts = line_counts(args)
    except (ConfigError, CodegenError) as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        return 2
    print(f"fleet: one module of {counts['module_lines']} lines for {counts['files']} YAMLs; "
          f"{counts['files']} single-file recipes: {counts['single_lines']} lines "
          f"(the module is {counts['ratio']:.0%} of them; "
          f"{counts['repeated_lines']} lines repeated across recipes, "
          f"{counts['repeated_across_baselines']} of them between different baselines; "
          f"{len(counts['families'])} shared functions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
