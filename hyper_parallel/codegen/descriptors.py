"""Model descriptors (``codegen/models/*.yaml``) as checked recipes.

A descriptor names a model package (its spec factory and flavor table) and its named recipes;
each recipe starts from a flavor or from another recipe and sets dotted ``HyperTrainer.Config``
paths. :func:`load_descriptors` checks everything the generated ``config_registry.py`` relies on
and reports every problem with ``file:line`` and the field:

* the model: the package exists, the spec factory is a function of one argument, the flavor
  table is a dict literal (both read from source; the model packages import torch);
* flavors: each listed flavor exists in the flavor table, each recipe's flavor is listed;
* recipes: ``flavor`` xor ``base``; the base exists; no cycles; a name that can be a recipe
  function (a lower-case identifier that shadows none of the module's imports);
* settings: the path is a leaf of the new tree (the table's sections, components and root
  fields; a near miss gets "did you mean"); ``model_spec`` and ``model.name`` come from the
  descriptor's model and flavor, not from settings; the value has the field's type and meets
  the table's constraints; it differs from what the recipe would otherwise have (the default,
  or the base's value) so that a recipe states only what differs;
* the resulting config: the sections' cross-field checks (the table's ``checks:``) hold, and
  ``training.global_batch_size`` is a multiple of ``local_batch_size`` x the data-parallel size
  whenever that size is known.

Every base recipe also gets ``model.name = <model name>`` and ``model.config_overrides =
{"flavor": <flavor>, ...}`` so that the legacy ``model`` section describes the same model as
``model_spec`` (a recipe may add other override keys; a ``flavor`` key must agree).
"""

from __future__ import annotations

import hashlib
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hyper_parallel.codegen import introspect
from hyper_parallel.codegen import types as T
from hyper_parallel.codegen.coverage import NewLeaf, Resolved
from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.yamlsrc import LDict, LList, load, plain
from hyper_parallel.utils.suggest import closest, did_you_mean
from hyper_parallel.utils.yaml_lines import holds_invalid

MODELS_DIR = "codegen/models"
REGISTRY = "hyper_parallel/models/{name}/config_registry.py"
FLAVOR_KEY = "flavor"
#: Paths a recipe may not set: they follow from the descriptor.
DERIVED_PATHS = {
    "model_spec": "it is built from the recipe's flavor (`flavor:`, or the base's) by the "
    "descriptor's spec factory",
    "model.name": "every recipe of a descriptor names its model (the descriptor's `model.name`)",
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass
class Setting:
    """One ``path: value`` of a recipe (``line`` 0: added by the generator)."""

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
class ModelDescriptor:
    path: Path
    rel: str
    sha256: str
    name: str
    doc: str
    factory_module: str
    factory: str
    flavor_module: str
    flavor_table: str
    flavors: list[str]
    recipes: list[Recipe]
    schema: str = ""  # hash of what was introspected for it (see schema_facts)

    @property
    def output(self) -> str:
        """The generated module, ``hyper_parallel/models/<name>/config_registry.py``."""
        return REGISTRY.format(name=self.name)


class _Problems:
    def __init__(self, rel: str):
        self.rel = rel
        self.items: list[str] = []

    def add(self, line: int, where: str, message: str) -> None:
        self.items.append(f"{self.rel}:{line}: {where}: {message}")


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def _paragraphs(value: Any) -> str:
    """A folded (``>-``) doc: a line break (a blank line in the YAML) separates paragraphs."""
    return "\n".join(_text(p) for p in str(value).strip().split("\n") if p.strip())


def _same(a: Any, b: Any) -> bool:
    return a == b and type(a) is type(b)


def _keys(obj: Any, where: str, line: int, allowed: tuple[str, ...], required: tuple[str, ...],
          problems: _Problems) -> bool:
    if not isinstance(obj, LDict):
        problems.add(line, where, f"must be a mapping, got {type(obj).__name__} {obj!r}")
        return False
    ok = True
    for key in obj:
        if key not in allowed:
            problems.add(obj.key_lines[key], where, f"unknown key {key!r}"
                         f"{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}")
            ok = False
    for key in required:
        if key not in obj:
            problems.add(obj.line, where, f"missing key {key!r}")
            ok = False
    return ok


# ---------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------


def constraint_problem(constraints: dict[str, Any], base: str, value: Any) -> str | None:
    """What ``value`` (not None, of type ``base``) violates in the table's constraints."""
    extra = constraints.get("extra_values") or []
    if base in ("int", "float") and value in extra:
        return None
    also = f" (or one of {', '.join(map(repr, extra))})" if extra else ""
    if "min" in constraints and value < constraints["min"]:
        return f"must be >= {constraints['min']!r}{also}"
    if "max" in constraints and value > constraints["max"]:
        return f"must be <= {constraints['max']!r}{also}"
    if constraints.get("nonempty"):
        items = value if isinstance(value, list) else [value]
        if any(v == "" for v in items):
            return "must not be empty"
    if "pattern" in constraints and not re.fullmatch(constraints["pattern"], value):
        return f"must be {constraints.get('pattern_hint') or 'matching ' + constraints['pattern']}"
    choices = constraints.get("items_choices")
    if choices is not None and any(v not in choices for v in value):
        bad = next(v for v in value if v not in choices)
        return (f"item {bad!r} is not allowed{did_you_mean(str(bad), choices)}; items must be "
                f"among: {', '.join(choices)}")
    return None


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


def _unknown_path(path: str, r: Resolved) -> str:
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


# ---------------------------------------------------------------------------------------------
# the descriptor
# ---------------------------------------------------------------------------------------------


@dataclass
class _RawRecipe:
    name: str
    line: int
    obj: LDict
    base: str | None
    flavor: str | None
    doc: str


def _model_section(data: LDict, repo: Path, problems: _Problems) -> dict[str, Any] | None:
    where = "model"
    if not _keys(data.get("model"), where, data.key_lines.get("model", 1),
                 ("name", "doc", "spec_factory", "flavor_table"),
                 ("name", "doc", "spec_factory", "flavor_table"), problems):
        return None
    obj = data["model"]
    name = obj["name"]
    ok = True
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        problems.add(obj.key_lines["name"], f"{where}.name",
                     f"must be the model package's name (an identifier), got {name!r}")
        ok = False
    elif not (repo / "hyper_parallel" / "models" / name / "__init__.py").is_file():
        known = sorted(p.parent.name for p in (repo / "hyper_parallel" / "models").glob("*/__init__.py"))
        problems.add(obj.key_lines["name"], f"{where}.name",
                     f"no package hyper_parallel/models/{name}/{did_you_mean(name, known)}; "
                     f"the recipes are written to {REGISTRY.format(name=name)}")
        ok = False
    targets = {}
    for key in ("spec_factory", "flavor_table"):
        text = obj[key]
        if not isinstance(text, str) or not _TARGET.fullmatch(text):
            problems.add(obj.key_lines[key], f"{where}.{key}",
                         f"expected 'package.module:name', got {text!r}")
            ok = False
            continue
        targets[key] = tuple(text.split(":"))
    if not ok:
        return None
    factory_module, factory = targets["spec_factory"]
    flavor_module, flavor_table = targets["flavor_table"]
    try:
        params = introspect.function_parameters(repo, factory_module, factory)
        if len(params) != 1:
            problems.add(obj.key_lines["spec_factory"], f"{where}.spec_factory",
                         f"{factory}({', '.join(params)}) must take exactly one argument, the "
                         "flavor name")
    except CodegenError as exc:
        problems.add(obj.key_lines["spec_factory"], f"{where}.spec_factory", str(exc))
    try:
        table_flavors = introspect.mapping_keys(repo, flavor_module, flavor_table)
    except CodegenError as exc:
        problems.add(obj.key_lines["flavor_table"], f"{where}.flavor_table", str(exc))
        table_flavors = None
    return {"name": name, "doc": _paragraphs(obj["doc"]), "factory_module": factory_module,
            "factory": factory, "flavor_module": flavor_module, "flavor_table": flavor_table,
            "table_flavors": table_flavors, "flavor_table_text": obj["flavor_table"]}


def _flavors(data: LDict, model: dict[str, Any] | None, problems: _Problems) -> list[str]:
    raw = data.get("flavors")
    line = data.key_lines.get("flavors", 1)
    if not isinstance(raw, LList) or not raw:
        problems.add(line, "flavors", "must be a non-empty list of flavor names")
        return []
    known = model["table_flavors"] if model else None
    out: list[str] = []
    for i, name in enumerate(raw):
        where = f"flavors[{i}]"
        if not isinstance(name, str):
            problems.add(raw.item_lines[i], where, f"a flavor name must be a string, got {name!r} "
                         "(quote names such as '0.8b' that YAML reads as numbers)")
            continue
        if name in out:
            problems.add(raw.item_lines[i], where, f"flavor {name!r} is listed twice")
            continue
        if known is not None and name not in known:
            problems.add(raw.item_lines[i], where,
                         f"unknown flavor {name!r}{did_you_mean(name, known)}; the flavor table "
                         f"{model['flavor_table_text']} has: {', '.join(known)}")
            continue
        out.append(name)
    return out


def _raw_recipes(data: LDict, problems: _Problems, reserved: set[str]) -> list[_RawRecipe]:
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
        if not _keys(obj, where, line, ("doc", "flavor", "base", "set"), ("doc",), problems):
            continue
        has_base, has_flavor = "base" in obj, "flavor" in obj
        if has_base == has_flavor:
            problems.add(obj.line, where, "give exactly one of `flavor:` (a base recipe) or "
                         "`base:` (a recipe derived from another one)")
            continue
        doc = _paragraphs(obj["doc"]) if isinstance(obj["doc"], str) else ""
        if not doc:
            problems.add(obj.key_lines["doc"], f"{where}.doc",
                         "must be a non-empty string (the recipe's docstring)")
            continue
        out.append(_RawRecipe(name, line, obj, obj.get("base"), obj.get("flavor"), doc))
    return out


def _chain_problems(raw: list[_RawRecipe], problems: _Problems) -> set[str]:
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


def _settings(recipe: _RawRecipe, r: Resolved, inherited: dict[str, Any], flavor: str,
              base_label: str, problems: _Problems) -> list[Setting] | None:
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
            problems.add(line, where, _unknown_path(path, r))
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
        if path == "model.config_overrides" and value is not None:
            value = _with_flavor(value, flavor, line, fwhere, problems)
            if value is None:
                ok = False
                continue
        if _same(value, inherited[path]):
            why = base_label
            if path == "model.config_overrides" and recipe.base is None:
                why = "the generator adds the flavor"
            problems.add(line, fwhere, f"{value!r} is what the recipe already has ({why}); "
                         "state only what differs: remove this line")
            ok = False
            continue
        out.append(Setting(path, value, line))
    return out if ok else None


def _with_flavor(value: dict[str, Any], flavor: str, line: int, where: str,
                 problems: _Problems) -> dict[str, Any] | None:
    """``model.config_overrides`` with ``flavor`` first; a different flavor is an error."""
    given = value.get(FLAVOR_KEY, flavor)
    if given != flavor:
        problems.add(line, f"{where}.{FLAVOR_KEY}",
                     f"{given!r} disagrees with the recipe's flavor {flavor!r}: the legacy model "
                     "section must describe the same model as model_spec; remove the key (the "
                     "generator adds it)")
        return None
    return {FLAVOR_KEY: flavor, **{k: v for k, v in value.items() if k != FLAVOR_KEY}}


def _check_result(recipe: Recipe, r: Resolved, lines: dict[str, int], problems: _Problems,
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


def _load_one(path: Path, rel: str, repo: Path, r: Resolved) -> ModelDescriptor:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CodegenError(f"{rel}: cannot read the descriptor: {exc}") from None
    problems = _Problems(rel)
    # The YAML-level problems (duplicate keys, YAML 1.1 spellings) are reported with the rest.
    data = load(text, rel, problems.items)
    parts = ("schema_version", "model", "flavors", "recipes")
    if not _keys(data, "the descriptor", 1, parts, parts, problems) and not isinstance(data, LDict):
        raise CodegenError(problems.items)
    if "schema_version" in data and data["schema_version"] != 1:
        problems.add(data.key_lines["schema_version"], "schema_version",
                     f"this generator reads schema_version 1, got {data['schema_version']!r}")
    # A missing part is reported above (``missing key``); the others are still checked.
    model = _model_section(data, repo, problems) if "model" in data else None
    flavors = _flavors(data, model, problems) if "flavors" in data else []
    reserved = {model["factory"]} if model else set()
    raw = _raw_recipes(data, problems, reserved) if "recipes" in data else []
    sound = _chain_problems(raw, problems)
    if model is None:  # the recipes cannot be checked without the model's facts
        raise CodegenError(problems.items)
    by_name = {rr.name: rr for rr in raw}
    order = _tree_order(r)
    defaults = {p: leaf.default for p, leaf in r.new.items()}
    done: dict[str, Recipe | None] = {}

    def build(rr: _RawRecipe) -> Recipe | None:
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
            auto: list[Setting] = []
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
            overrides = {FLAVOR_KEY: flavor}
            auto = [Setting("model.name", model["name"], 0),
                    Setting("model.config_overrides", overrides, 0)]
            inherited = {**defaults, "model.name": model["name"],
                         "model.config_overrides": overrides}
            label = "it is the default"
        settings = _settings(rr, r, inherited, flavor, label, problems)
        if settings is None:
            return None
        if rr.base is None:
            stated = {s.path for s in settings}
            settings = [s for s in auto if s.path not in stated] + settings
        elif not settings:
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
    if problems.items:
        raise CodegenError(problems.items)
    descriptor = ModelDescriptor(
        path=path, rel=rel, sha256=hashlib.sha256(text.encode()).hexdigest(), name=model["name"],
        doc=model["doc"], factory_module=model["factory_module"], factory=model["factory"],
        flavor_module=model["flavor_module"], flavor_table=model["flavor_table"],
        flavors=flavors, recipes=[rc for rc in recipes if rc is not None],
    )
    descriptor.schema = schema_hash(r, descriptor, model["table_flavors"] or [])
    return descriptor


def schema_hash(r: Resolved, d: ModelDescriptor, table_flavors: list[str]) -> str:
    """Hash of the introspected facts a registry depends on: the component Configs' fields
    (types and defaults decide what a recipe must state), the flavor names and the factory."""
    facts = [repr(sorted((slot, n, i.type, repr(i.default))
                         for slot, fields in r.components.items() for n, i in fields.items())),
             repr(table_flavors), f"{d.factory_module}:{d.factory}"]
    return hashlib.sha256("\n".join(facts).encode()).hexdigest()


def descriptor_paths(repo: Path) -> list[Path]:
    """The descriptors, ``codegen/models/*.yaml``, sorted."""
    return sorted((Path(repo) / MODELS_DIR).glob("*.yaml"))


def load_descriptors(repo: Path, r: Resolved) -> list[ModelDescriptor]:
    """Load and check every descriptor; one :class:`CodegenError` lists every problem."""
    repo = Path(repo)
    problems: list[str] = []
    out: list[ModelDescriptor] = []
    for path in descriptor_paths(repo):
        rel = path.relative_to(repo).as_posix()
        try:
            out.append(_load_one(path, rel, repo, r))
        except CodegenError as exc:
            problems.extend(exc.problems)
    seen: dict[str, str] = {}
    for d in out:
        if d.output in seen:
            problems.append(f"{d.rel}:1: model.name: {d.name!r} is also the model of "
                            f"{seen[d.output]}; one descriptor per model package")
        seen[d.output] = d.rel
    if problems:
        raise CodegenError(problems)
    return out


def output_paths(repo: Path) -> list[str]:
    """The registry paths the descriptors produce, read without checking them (for listings)."""
    paths = []
    for path in descriptor_paths(repo):
        try:
            data = load(path.read_text(encoding="utf-8"), str(path))
            paths.append(REGISTRY.format(name=data["model"]["name"]))
        except (CodegenError, KeyError, TypeError):
            continue
    return paths
