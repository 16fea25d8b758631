"""Fleet migration: several legacy YAMLs become one registry module, proven before it is written.

``python -m hyper_parallel.codegen --from-yaml a.yaml b.yaml dir/`` (a folder stands for its
``*.yaml`` / ``*.yml`` files in name order) writes one module in the ``config_registry.py``
style (default ``recipes/config_registry.py``):

1. Every YAML is read, canonicalised and converted as in :mod:`.from_yaml` (its *target*), and
   gets its own baseline (:func:`~.from_yaml.choose_baseline`). Overrides after ``--`` apply to
   every file.
2. The planner picks the *base*: it starts from the baseline most files share and sets
   the fields on which all the files that call it agree. A file calls the base, or the recipe of
   a *sibling* whose settings are a subset of its own (when that leaves fewer lines; ties go to
   the base), or -- when that is shorter, e.g. another flavor -- its own baseline. Who calls the
   base is chosen by line count (a local search from "the files on the shared baseline").
3. Each recipe sets, one line each, the fields where its YAML differs from what it calls,
   commented with ``name.yaml:LINE legacy.key`` (``command line: --a.b=c`` for an override) and
   the YAML's own comments; the base's lines say which key they come from and that all its
   YAMLs share it, and carry the YAMLs' comments on that key (once each).
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen import from_yaml as fy
from hyper_parallel.codegen import launch as launch_mod
from hyper_parallel.codegen.errors import CodegenError

TEMPLATE = "registry_from_yaml.py.j2"
DEFAULT_OUTPUT = Path("recipes") / "config_registry.py"
#: The lines a base function costs besides its assignments (blank lines, ``def``, docstring,
#: first line, ``return``): a base is only written when it saves more than that.
BASE_COST = 6
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
    words = [n.split("_") for n in names]
    common: list[str] = []
    for group in zip(*words):
        if len(set(group)) != 1 or not group[0]:
            break
        common.append(group[0])
    prefix = "_".join(common)
    stem = f"{prefix}_" if prefix else ""
    blocked = set(names) | set(taken) | fy.RESERVED_NAMES
    for candidate in [f"{stem}base", f"{stem}shared"] + [f"{stem}base_{i}" for i in range(2, 100)]:
        if fy.name_problem(candidate) is None and candidate not in blocked:
            return candidate
    raise CodegenError("no free name for the base recipe")  # 100 names taken: not reachable


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
    """The function it calls: the base's name, a sibling's, or its own baseline's call."""
    goal: Any = None
    """What the recipe builds: ``target`` on the spec of the baseline it descends from."""
    head: fy.RecipeLine | None = None
    lines: list[fy.RecipeLine] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    doc: str = ""
    keys_written: int = 0
    keys_mapped: int = 0
    unmapped: list[str] = field(default_factory=list)


def _same_change(a: fy.Change, b: fy.Change | None) -> bool:
    return b is not None and a.path == b.path and a.delete == b.delete \
        and fy._same(a.value, b.value)


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


@dataclass
class Plan:
    """The base (``shared`` changes on ``root``, called by ``members``; none when ``shared`` is
    empty) and each file's parent: ``"base"``, ``"own"`` (its own baseline) or a file index."""

    requested: frozenset[int]
    members: frozenset[int]
    shared: list[fy.Change]
    parents: dict[int, Any]
    cost: int


class _Planner:
    """Chooses the base and every file's parent by the number of lines they leave."""

    def __init__(self, recipes: list[FleetRecipe]):
        self.recipes = recipes
        counts = Counter(r.own.code for r in recipes)
        most = max(counts.values())
        # The baseline most files share; on a tie, the first file's.
        self.root = next(r.own for r in recipes if counts[r.own.code] == most)
        self.on_root = [fy._on_baseline_spec(r.target, self.root) for r in recipes]
        self.on_own = [fy._on_baseline_spec(r.target, r.own) for r in recipes]
        self.rel_root = [fy.field_changes(self.root.config, t) for t in self.on_root]
        self.rel_own = [fy.field_changes(r.own.config, t) for r, t in zip(recipes, self.on_own)]
        self.root_index = [{c.path: c for c in rel} for rel in self.rel_root]
        self.own_index = [{c.path: c for c in rel} for rel in self.rel_own]
        self._sibling: dict[tuple[int, int, bool], int | None] = {}

    def goal(self, i: int, member: bool) -> Any:
        return self.on_root[i] if member else self.on_own[i]

    def sibling_lines(self, i: int, j: int, member: bool) -> int | None:
        """The lines of ``i`` calling ``j`` (both members of the base, or both not, on the same
        own baseline), or None when ``j``'s settings are not a subset of ``i``'s (or ``j`` comes
        after ``i`` in the order that keeps calls acyclic)."""
        key = (i, j, member)
        if key not in self._sibling:
            rel, index = (self.rel_root, self.root_index) if member else (self.rel_own,
                                                                         self.own_index)
            ok = i != j and (len(rel[j]), j) < (len(rel[i]), i) \
                and all(_same_change(c, index[i].get(c.path)) for c in rel[j])
            if ok and not member:
                ok = self.recipes[i].own.code == self.recipes[j].own.code
            self._sibling[key] = (len(fy.field_changes(self.goal(j, member), self.goal(i, member)))
                                  if ok else None)
        return self._sibling[key]

    def evaluate(self, requested: frozenset[int]) -> Plan:
        members = requested
        shared: list[fy.Change] = []
        if len(members) >= 2:
            first = min(members)
            shared = [c for c in self.rel_root[first]
                      if all(_same_change(c, self.root_index[k].get(c.path)) for k in members)]
        if not shared:
            members = frozenset()
        cost = len(shared) + BASE_COST if shared else 0
        parents: dict[int, Any] = {}
        for i in range(len(self.recipes)):
            member = i in members
            # Calling the base leaves exactly the changes it does not share.
            options = [(len(self.rel_root[i]) - len(shared) if member else len(self.rel_own[i]),
                        0, "base" if member else "own")]
            for j in range(len(self.recipes)):
                if (j in members) == member:
                    lines = self.sibling_lines(i, j, member)
                    if lines is not None:
                        options.append((lines, 1, j))
            lines, _, parent = min(options, key=lambda o: (o[0], o[1], str(o[2])))
            parents[i] = parent
            cost += lines
        return Plan(requested, members, shared, parents, cost)

    def plan(self) -> Plan:
        """A local search over who calls the base, from "the files on the shared baseline"."""
        n = len(self.recipes)
        best = self.evaluate(frozenset(i for i in range(n)
                                       if self.recipes[i].own.code == self.root.code))
        while True:
            trials = [self.evaluate(best.requested ^ {i}) for i in range(n)]
            top = min(trials, key=lambda p: p.cost)
            if top.cost >= best.cost:
                break
            best = top
        empty = self.evaluate(frozenset())
        return best if best.cost <= empty.cost else empty


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------


def _count_text(members: list[FleetRecipe], total: list[FleetRecipe]) -> str:
    """``all N YAMLs`` / ``N of M YAMLs``: the YAMLs that call the base."""
    if len(members) == len(total):
        return f"all {len(members)} YAMLs"
    return f"{len(members)} of {len(total)} YAMLs"


def _who(members: list[FleetRecipe], total: list[FleetRecipe]) -> str:
    """The YAMLs that call the base, for its docstring."""
    if len(members) == len(total):
        return f"all {len(members)} YAMLs"
    names = [Path(r.source.display).name for r in members]
    return f"{len(members)} of the {len(total)} YAMLs ({', '.join(names)})"


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
class Fleet:
    """A converted fleet: the module text and what the report says about it."""

    text: str
    output: Path
    recipes: list[FleetRecipe]
    base: str | None
    base_root: fy.Baseline | None
    base_lines: list[fy.RecipeLine]
    members: list[str]
    command: str
    proof_seconds: float = 0.0

    @property
    def line_count(self) -> int:
        return len(self.text.splitlines())

    def repeated(self) -> dict[str, list[str]]:
        """Each line that two or more recipes set -> the recipes setting it."""
        found: dict[str, list[str]] = {}
        for line in self.base_lines:
            found.setdefault(line.code, []).append(self.base)
        for recipe in self.recipes:
            for line in recipe.lines:
                found.setdefault(line.code, []).append(recipe.name)
        return {code: names for code, names in found.items() if len(names) > 1}


def _parent_call(plan_parent: Any, names: list[str], base: str | None,
                 count: str) -> tuple[str, str]:
    """``(call, provenance)`` of a file recipe's first line."""
    if plan_parent == "base":
        return f"{base}()", f"the settings shared by {count}"
    sibling = names[plan_parent]
    return f"{sibling}()", f"what {sibling} sets: this YAML has all of its settings"


def convert_fleet(inputs: Inputs | list[Path | str], output: Path | None = None,
                  repo: Path | None = None, strict: bool = False,
                  base: Path | None = None) -> Fleet:
    """Read, convert, plan, render and prove every input; writes nothing. ``output`` (default
    ``recipes/config_registry.py`` under ``base``) names the module in the ``torchrun`` lines;
    ``base`` as in :func:`~.from_yaml.convert`."""
    from hyper_parallel.codegen import render as render_module
    from hyper_parallel.codegen.pipeline import _environment

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
    planner = _Planner(recipes)
    plan = planner.plan()
    members = [recipes[i] for i in sorted(plan.members)]
    has_base = bool(plan.shared)
    base_fn = base_name(names, imported) if has_base else None
    count = _count_text(members, recipes) if has_base else ""
    imports: set[tuple[str, str]] = {fy.TRAINER}
    provs = [fy._Provenance(r.source) for r in recipes]

    # The base.
    base_head = base_lines = None
    base_config = None
    if has_base:
        root = planner.root
        imports |= root.imports
        member_provs = [provs[i] for i in sorted(plan.members)]
        text, anchor, paths = _shared_provenance(list(root.keys), member_provs, count, "baseline")
        base_head = fy.RecipeLine(f"config = {root.code}", text, 0, paths)
        base_lines = []
        for change in plan.shared:
            code = fy._code(change, imports)
            keys = member_provs[0].legacy_keys(change)
            text, anchor, paths = _shared_provenance(keys, member_provs, count, change.dotted)
            base_lines.append(fy.RecipeLine(code, text, anchor, paths))
        base_lines.sort(key=lambda line: (line.anchor, line.code))
        base_config = apply_changes(root.config, plan.shared)

    # The file recipes, parents before children (the comments of a key an ancestor sets go to
    # the ancestor's line, after its own).
    def depth(i: int) -> int:
        parent = plan.parents[i]
        return 0 if not isinstance(parent, int) else 1 + depth(parent)

    module = fy.module_name_for(output, base) or f"<the module path of {output.name[:-3]}>"
    order = sorted(range(len(recipes)), key=lambda i: (depth(i), i))
    inherited: dict[int, list[fy.RecipeLine]] = {}
    for i in order:
        recipe, prov, parent = recipes[i], provs[i], plan.parents[i]
        member = i in plan.members
        recipe.goal = planner.goal(i, member)
        if parent == "own":
            imports |= recipe.own.imports
            recipe.parent = recipe.own.code
            start = recipe.own.config
            base_keys = [k for k in recipe.own.keys if prov.line(k) is not None]
            text, anchor, paths = prov.describe(list(recipe.own.keys), "baseline")
            if not base_keys:
                text, anchor = fy.comment_text(recipe.own.described), 0
            recipe.head = fy.RecipeLine(f"config = {recipe.own.code}", text, anchor, paths)
            ancestors: list[fy.RecipeLine] = []
        else:
            call, text = _parent_call(parent, names, base_fn, count)
            recipe.parent = call
            recipe.head = fy.RecipeLine(f"config = {call}", fy.comment_text(text),
                                        _head_anchor(recipe.source))
            if parent == "base":
                start = base_config
                ancestors = [base_head] + base_lines
            else:
                start = recipes[parent].goal
                ancestors = inherited[parent]
        recipe.lines = []
        for change in fy.field_changes(start, recipe.goal):
            code = fy._code(change, imports)
            text, anchor, paths = prov.describe(prov.legacy_keys(change), change.dotted)
            recipe.lines.append(fy.RecipeLine(code, text, anchor, paths))
        recipe.lines.sort(key=lambda line: (line.anchor, line.code))
        recipe.tail = fy._attach_comments(recipe.source, [recipe.head] + recipe.lines, ancestors)
        inherited[i] = ancestors + [recipe.head] + recipe.lines
        recipe.doc = _recipe_doc(recipe, module)

    command = inputs.command()
    functions = []
    if has_base:
        functions.append({"name": base_fn, "doc": _base_doc(base_fn, planner.root,
                                                            _who(members, recipes),
                                                            len(plan.shared)),
                          "head": base_head, "lines": base_lines, "tail": []})
    functions += [{"name": r.name, "doc": r.doc, "head": r.head, "lines": r.lines,
                   "tail": r.tail} for r in recipes]
    context = {
        "docstring": _module_doc(recipes, base_fn, command, inputs.extra),
        "imports": fy._import_lines(imports),
        "exports": sorted(f["name"] for f in functions),
        "recipes": functions,
    }
    if not (repo / fy.TEMPLATES / TEMPLATE).is_file():
        raise CodegenError(f"{fy.TEMPLATES}/{TEMPLATE} not found under {repo}: the converter runs "
                           "from a checkout of hyper_parallel (pip install -e .)")
    raw = _environment(repo).get_template(TEMPLATE).render(**context)
    try:
        text = render_module.format_python(raw)
    except Exception as exc:  # a bug here, never the user's input: values are checked literals
        raise CodegenError(f"{TEMPLATE}: the rendered module is not valid Python ({exc})") from exc
    fleet = Fleet(text, output, recipes, base_fn, planner.root if has_base else None,
                  base_lines or [], [r.name for r in members], command)
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


def _base_doc(name: str, root: fy.Baseline, count: str, lines: int) -> str:
    text = _fill(f"The settings shared by {count}: {root.described}, and the {lines} "
                 f"field{'s' if lines != 1 else ''} they agree on. Their recipes below call it "
                 "(directly or through another recipe).", width=_FUNCTION_DOC_WIDTH)
    return fy._docstring_text(text.replace("\n", "\n    ") + "\n    ")


def _module_doc(recipes: list[FleetRecipe], base: str | None, command: str,
                extra: tuple[str, ...]) -> str:
    head = (f"Recipes converted from {len(recipes)} legacy YAML{'s' if len(recipes) != 1 else ''}"
            ": one zero-argument function per YAML, each returning a fresh "
            "``HyperTrainer.Config`` (train one with ``--module M --config NAME``).")
    how = (
        (f"What the YAMLs share is set once, in ``{base}``. Each recipe calls it, the recipe of a "
         "YAML whose settings it contains, or the flavor baseline of its own model, "
         if base else
         "Each recipe calls the recipe of a YAML whose settings it contains, or the flavor "
         "baseline of its model, ")
        + "and sets, one line each, the fields where its YAML differs, commented with the legacy "
        "key and the line it comes from. Before writing, the converter executed this module, "
        "called every recipe and checked that each builds its YAML's configuration and converts "
        "back to the YAML's canonical form."
    )
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
    if fleet.base:
        rows.append(["(shared)", fleet.base, fleet.base_root.code, str(len(fleet.base_lines)),
                     "-", "-"])
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
    lines.append(f"  module: {fleet.line_count} lines; lines repeated across recipes: "
                 + (f"{extra}" if extra else "none"))
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
          f"{counts['repeated_lines']} lines repeated across recipes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
