"""A model descriptor's recipes, checked against the new tree.

Each recipe starts from a flavor (a base recipe) or from another recipe (``base:``) and sets
dotted ``HyperTrainer.Config`` paths. Checked here: a name that can be a recipe function, no
unknown base and no cycle; every setting names a leaf of the tree (with a did-you-mean), has the
field's type, meets the table's constraints (:mod:`.constraints`) and differs from what the
recipe would have without it; the result meets the sections' cross-field checks and the
batch-size rule. :mod:`.descriptors` reads the rest of the descriptor.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hyper_parallel.codegen.table import types as T
from hyper_parallel.codegen.table.checked_yaml import Problems, check_keys, one_line
from hyper_parallel.codegen.table.constraints import constraint_problem
from hyper_parallel.codegen.table.coverage import NewLeaf, Resolved
from hyper_parallel.config.legacy_spec import FLAVOR_KEY
from hyper_parallel.utils.suggest import closest, did_you_mean
from hyper_parallel.utils.yaml_lines import LDict, holds_invalid, plain

#: Paths a recipe may not set: they follow from the descriptor.
DERIVED_PATHS = {
    "model_spec": "it is built from the recipe's flavor (`flavor:`, or the base's) by the "
    "descriptor's spec factory",
    "model.name": "the recipe's model_spec names the model (the descriptor's spec factory); "
    "converting the recipe to the legacy schema writes that name",
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Setting:
    """One ``path: value`` of a recipe, at its line of the descriptor."""

    path: str
    value: Any
    line: int


@dataclass
class Recipe:
    """A checked recipe: ``settings`` are what its function states (base recipes: everything
    that is not a default, derived recipes: what differs from the base), in the tree's order;
    ``effective`` is every leaf's resulting value."""

    name: str
    line: int
    doc: str
    flavor: str
    base: str | None
    settings: list[Setting]
    effective: dict[str, Any] = field(default_factory=dict)


@dataclass
class RawRecipe:
    """A recipe as the descriptor writes it, before its settings are checked."""

    name: str
    line: int
    obj: LDict
    base: str | None
    flavor: str | None
    doc: str


def paragraphs(value: Any) -> str:
    """A folded (``>-``) doc: a line break (a blank line in the YAML) separates paragraphs."""
    return "\n".join(one_line(p) for p in str(value).strip().split("\n") if p.strip())


def _same(a: Any, b: Any) -> bool:
    return a == b and type(a) is type(b)


def check_value(leaf: NewLeaf, raw: Any) -> tuple[Any, str | None]:
    """``(value as the field's type, problem or None)`` for a descriptor value."""
    value = T.from_yaml(plain(raw), leaf.type)
    if not T.matches(value, leaf.type):
        literal = T.literal_values(leaf.type)
        if literal is not None:
            choices = ", ".join(repr(v) for v in literal)
            return value, (f"{raw!r} is not allowed{did_you_mean(str(raw), map(str, literal))}; "
                           f"choose one of: {choices}"
                           + (" (or null)" if T.split_optional(leaf.type)[1] else ""))
        shown = "null" if raw is None else repr(plain(raw))
        return value, f"wrong type: {shown} is not of type {leaf.type}"
    if value is not None and leaf.spec is not None and leaf.spec.constraints:
        base, _ = T.split_optional(leaf.type)
        problem = constraint_problem(leaf.spec.constraints, base, value)
        if problem:
            return value, f"{value!r}: {problem}"
    return value, None


def unknown_path(path: str, r: Resolved) -> str:
    """The problem of a setting whose path is no leaf of the tree, with the nearest one."""
    containers = {leaf.container for leaf in r.new.values() if leaf.container}
    if path in containers:
        names = [leaf.name for leaf in r.new.values() if leaf.container == path]
        return (f"{path!r} is a section of HyperTrainer.Config, not a field; set its fields "
                f"({path}.{names[0]}, ...): {', '.join(names)}")
    head, _, name = path.rpartition(".")
    if head in containers:
        # The section is right: compare the field name with its fields only (on whole paths the
        # shared prefix would make any field of the section look close).
        names = [leaf.name for leaf in r.new.values() if leaf.container == head]
        near = closest(name, names)
        hint = f"{head}.{near}" if near else None
    else:
        hint = closest(path, r.new)
        if hint is None:  # a wrong section: is the field name unique somewhere else?
            same = [p for p, leaf in r.new.items() if leaf.name == name]
            hint = same[0] if len(same) == 1 else None
    text = f"unknown field {path!r}" + (f" (did you mean {hint!r}?)" if hint else "")
    if head in containers and not hint:
        text += f"; {head} has: {', '.join(names)}"
    elif not hint:
        text += (f"; HyperTrainer.Config has: {', '.join(sorted(containers))} and the fields "
                 f"{', '.join(p for p, leaf in r.new.items() if not leaf.container)}")
    return text


def raw_recipes(data: LDict, problems: Problems, reserved: set[str]) -> list[RawRecipe]:
    raw = data.get("recipes")
    if not isinstance(raw, LDict) or not raw:
        problems.add(data.key_lines.get("recipes", 1), "recipes",
                     "must map recipe names to recipes")
        return []
    out = []
    for name, obj in raw.items():
        line = raw.key_lines[name]
        where = f"recipes.{name}"
        if (not _IDENT.fullmatch(name) or keyword.iskeyword(name) or not name[0].islower()):
            problems.add(line, where, "a recipe name must be a lower-case Python identifier (it "
                         "is the function name and the --config value)")
            continue
        if name in reserved:
            problems.add(line, where, f"{name!r} is a name the generated module imports; choose "
                         "another recipe name")
            continue
        if not check_keys(obj, where, line, ("doc", "flavor", "base", "set"), ("doc",), problems):
            continue
        has_base, has_flavor = "base" in obj, "flavor" in obj
        if has_base == has_flavor:
            problems.add(obj.line, where, "give exactly one of `flavor:` (a base recipe) or "
                         "`base:` (a recipe derived from another one)")
            continue
        doc = paragraphs(obj["doc"]) if isinstance(obj["doc"], str) else ""
        if not doc:
            problems.add(obj.key_lines["doc"], f"{where}.doc",
                         "must be a non-empty string (the recipe's docstring)")
            continue
        out.append(RawRecipe(name, line, obj, obj.get("base"), obj.get("flavor"), doc))
    return out


def chain_problems(raw: list[RawRecipe], problems: Problems) -> set[str]:
    """Report unknown bases and cycles; returns the names whose base chain is sound."""
    by_name = {r.name: r for r in raw}
    sound: set[str] = set()
    reported: set[frozenset[str]] = set()
    for recipe in raw:
        chain = [recipe.name]
        current = recipe
        while current.base is not None:
            base = current.base
            if not isinstance(base, str) or base not in by_name:
                if current is recipe:
                    problems.add(recipe.obj.key_lines["base"], f"recipes.{recipe.name}.base",
                                 f"unknown base recipe {base!r}"
                                 f"{did_you_mean(str(base), by_name)}; recipes: "
                                 f"{', '.join(by_name)}")
                break
            if base in chain:
                cycle = chain[chain.index(base):]
                if frozenset(cycle) not in reported and recipe.name in cycle:
                    reported.add(frozenset(cycle))
                    problems.add(recipe.obj.key_lines["base"], f"recipes.{recipe.name}.base",
                                 "recipes derive from each other in a cycle: "
                                 + " -> ".join([*cycle, base]) + "; one of them must start "
                                 "from a `flavor:`")
                break
            chain.append(base)
            current = by_name[base]
        else:
            sound.add(recipe.name)
    return sound


def _settings(recipe: RawRecipe, r: Resolved, inherited: dict[str, Any], flavor: str,
              base_label: str, problems: Problems) -> list[Setting] | None:
    """The recipe's ``set:`` checked against the tree; ``inherited`` is every leaf's value
    without it (defaults or the base's result). None when anything is wrong (reported)."""
    obj = recipe.obj.get("set")
    where = f"recipes.{recipe.name}.set"
    if obj is None:
        return []
    if not isinstance(obj, LDict):
        problems.add(recipe.obj.key_lines["set"], where,
                     "must map dotted HyperTrainer.Config paths to values")
        return None
    out: list[Setting] = []
    ok = True
    for path, raw in obj.items():
        line = obj.key_lines[path]
        fwhere = f"{where}.{path}"
        if path in DERIVED_PATHS:
            problems.add(line, fwhere, f"cannot be set here: {DERIVED_PATHS[path]}")
            ok = False
            continue
        leaf = r.new.get(path)
        if leaf is None:
            problems.add(line, where, unknown_path(path, r))
            ok = False
            continue
        if holds_invalid(raw):
            ok = False  # a value YAML could not read: its problem is reported already
            continue
        value, problem = check_value(leaf, raw)
        if problem:
            problems.add(line, fwhere, problem)
            ok = False
            continue
        if path == "model.config_overrides" and isinstance(value, dict) and FLAVOR_KEY in value:
            problems.add(line, f"{fwhere}.{FLAVOR_KEY}", _flavor_key_problem(value, flavor))
            ok = False
            continue
        if _same(value, inherited[path]):
            problems.add(line, fwhere, f"{value!r} is what the recipe already has ({base_label}); "
                         "state only what differs: remove this line")
            ok = False
            continue
        out.append(Setting(path, value, line))
    return out if ok else None


def _flavor_key_problem(value: dict[str, Any], flavor: str) -> str:
    """Why ``model.config_overrides`` may not name a flavor: the recipe's spec does."""
    given = value[FLAVOR_KEY]
    if given == flavor:
        return (f"{given!r} is the recipe's flavor already: its model_spec carries it (converting "
                "to the legacy schema writes it); remove the key")
    return (f"{given!r} disagrees with the recipe's flavor {flavor!r}: the flavor is the "
            "model_spec's (`flavor:`, or the base's); remove the key, or start a base recipe "
            f"with `flavor: {given}`")


def _check_result(recipe: Recipe, r: Resolved, lines: dict[str, int], problems: Problems,
                  rel_where: str) -> None:
    """The table's cross-field checks and the batch-size rule on the recipe's result."""
    eff = recipe.effective
    for section in r.table.sections:
        values = {f.name: eff[f"{section.name}.{f.name}"] for f in section.fields}
        ns = SimpleNamespace(**values)
        for chk in section.checks:
            # The table's own expressions (hand-written, reviewed), as __post_init__ runs them.
            try:
                applies = eval(chk.when, {}, {"self": ns}) if chk.when else True
                holds = not applies or eval(chk.require, {}, {"self": ns})
                message = chk.message
            except Exception as exc:  # noqa: BLE001 - a bad table expression, reported here
                holds, message = False, f"cannot be checked ({exc!r})"
            if not holds:
                path = f"{section.name}.{chk.field}"
                # Point at the checked field, else at another field the rule reads, if the
                # recipe states it; else at the recipe.
                read = re.findall(r"self\.(\w+)", f"{chk.when or ''} {chk.require}")
                stated = [lines[p] for p in (path, *(f"{section.name}.{n}" for n in read))
                          if p in lines]
                problems.add(stated[0] if stated else recipe.line, rel_where,
                             f"{path}={values[chk.field]!r} {message}")
    local, global_ = eff["training.local_batch_size"], eff["training.global_batch_size"]
    shard = eff["parallelism.data_parallel_shard_degree"]
    if shard != -1 and global_ >= local:  # global < local is the table's own check, above
        dp = eff["parallelism.data_parallel_replicate_degree"] * (shard or 1)
        if global_ % (local * dp):
            paths = ("training.global_batch_size", "training.local_batch_size",
                     "parallelism.data_parallel_shard_degree",
                     "parallelism.data_parallel_replicate_degree")
            line = next((lines[p] for p in paths if p in lines), recipe.line)
            problems.add(line, rel_where,
                         f"training.global_batch_size={global_} is not a multiple of "
                         f"local_batch_size={local} x data-parallel size {dp}; change one of them")


def _tree_order(r: Resolved) -> dict[str, int]:
    """Leaf path -> position in HyperTrainer.Config (root fields, sections and components in the
    table's root order, fields in declaration order)."""
    return {path: i for i, path in enumerate(r.new)}


def build_recipes(raw: list[RawRecipe], sound: set[str], model: dict[str, Any],
                  flavors: list[str], r: Resolved, problems: Problems) -> list[Recipe]:
    """The checked recipes of ``raw`` whose base chain is ``sound``, in order; each problem is
    reported (a recipe with one, or whose base has one, is left out)."""
    by_name = {rr.name: rr for rr in raw}
    order = _tree_order(r)
    defaults = {p: leaf.default for p, leaf in r.new.items()}
    done: dict[str, Recipe | None] = {}

    def build(rr: RawRecipe) -> Recipe | None:
        if rr.name in done:
            return done[rr.name]
        done[rr.name] = None
        where = f"recipes.{rr.name}"
        if rr.base is not None:
            base = build(by_name[rr.base])
            if base is None:
                return None  # the base's own problems are reported
            flavor = base.flavor
            inherited = dict(base.effective)
            label = f"base {rr.base} gives it"
        else:
            flavor = rr.flavor
            if not isinstance(flavor, str) or flavor not in flavors:
                known = model["table_flavors"]
                hint = (" (it is in the flavor table: add it to `flavors:`)"
                        if known and flavor in known else did_you_mean(str(flavor), flavors))
                problems.add(rr.obj.key_lines["flavor"], f"{where}.flavor",
                             f"unknown flavor {flavor!r}{hint}; listed flavors: "
                             f"{', '.join(flavors)}")
                return None
            inherited = dict(defaults)
            label = "it is the default"
        settings = _settings(rr, r, inherited, flavor, label, problems)
        if settings is None:
            return None
        if rr.base is not None and not settings:
            problems.add(rr.line, where, f"derives from {rr.base} but sets nothing; a derived "
                         "recipe must change something (or remove it)")
            return None
        settings.sort(key=lambda s: order[s.path])
        effective = {**inherited, **{s.path: s.value for s in settings}}
        recipe = Recipe(rr.name, rr.line, rr.doc, flavor, rr.base, settings, effective)
        _check_result(recipe, r, {s.path: s.line for s in settings if s.line}, problems, where)
        done[rr.name] = recipe
        return recipe

    recipes = [build(rr) for rr in raw if rr.name in sound]
    return [recipe for recipe in recipes if recipe is not None]
