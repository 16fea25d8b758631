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
  fields; a near miss gets "did you mean"); ``model_spec`` comes from the descriptor's model
  and flavor, not from settings, and ``model.name`` and ``model.config_overrides['flavor']``
  are not written at all (the spec names the model and its flavor); the value has the
  field's type and meets
  the table's constraints; it differs from what the recipe would otherwise have (the default,
  or the base's value) so that a recipe states only what differs;
* the resulting config: the sections' cross-field checks (the table's ``checks:``) hold, and
  ``training.global_batch_size`` is a multiple of ``local_batch_size`` x the data-parallel size
  whenever that size is known.

A recipe states its model once, in ``model_spec=<factory>("<flavor>")``: the engine reads the
model from the spec, and converting the recipe to the legacy schema derives ``model.name`` and
``model.config_overrides['flavor']`` from it (``config.legacy_spec``). ``model.config_overrides``
holds only real overrides (a ``flavor`` key is refused: it would state the flavor twice).

The model and its flavors are read here; the recipes and their settings are checked by
:mod:`.descriptor_recipes`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.table import introspect
from hyper_parallel.codegen.table.checked_yaml import Problems, check_keys, load
from hyper_parallel.codegen.table.coverage import Resolved
from hyper_parallel.codegen.table.descriptor_recipes import (
    Recipe,
    build_recipes,
    chain_problems,
    paragraphs,
    raw_recipes,
)
from hyper_parallel.utils.suggest import did_you_mean
from hyper_parallel.utils.yaml_lines import LDict, LList

MODELS_DIR = "codegen/models"
REGISTRY = "hyper_parallel/models/{name}/config_registry.py"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


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


def _model_section(data: LDict, repo: Path, problems: Problems) -> dict[str, Any] | None:
    where = "model"
    if not check_keys(data.get("model"), where, data.key_lines.get("model", 1),
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
    return {"name": name, "doc": paragraphs(obj["doc"]), "factory_module": factory_module,
            "factory": factory, "flavor_module": flavor_module, "flavor_table": flavor_table,
            "table_flavors": table_flavors, "flavor_table_text": obj["flavor_table"]}


def _flavors(data: LDict, model: dict[str, Any] | None, problems: Problems) -> list[str]:
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


def _load_one(path: Path, rel: str, repo: Path, r: Resolved) -> ModelDescriptor:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CodegenError(f"{rel}: cannot read the descriptor: {exc}") from None
    problems = Problems(rel)
    # The YAML-level problems (duplicate keys, unsupported tags) are reported with the rest.
    data = load(text, rel, problems.items)
    parts = ("schema_version", "model", "flavors", "recipes")
    if not check_keys(data, "the descriptor", 1, parts, parts, problems) and not isinstance(data, LDict):
        raise CodegenError(problems.items)
    if "schema_version" in data and data["schema_version"] != 1:
        problems.add(data.key_lines["schema_version"], "schema_version",
                     f"this generator reads schema_version 1, got {data['schema_version']!r}")
    # A missing part is reported above (``missing key``); the others are still checked.
    model = _model_section(data, repo, problems) if "model" in data else None
    flavors = _flavors(data, model, problems) if "flavors" in data else []
    reserved = {model["factory"]} if model else set()
    raw = raw_recipes(data, problems, reserved) if "recipes" in data else []
    sound = chain_problems(raw, problems)
    if model is None:  # the recipes cannot be checked without the model's facts
        raise CodegenError(problems.items)
    recipes = build_recipes(raw, sound, model, flavors, r, problems)
    if problems.items:
        raise CodegenError(problems.items)
    descriptor = ModelDescriptor(
        path=path, rel=rel, sha256=hashlib.sha256(text.encode()).hexdigest(), name=model["name"],
        doc=model["doc"], factory_module=model["factory_module"], factory=model["factory"],
        flavor_module=model["flavor_module"], flavor_table=model["flavor_table"],
        flavors=flavors, recipes=recipes,
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
