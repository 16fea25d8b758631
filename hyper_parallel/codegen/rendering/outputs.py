"""The generated files, and exactly what each one is generated from.

The field table produces the five configuration files of :data:`OUTPUTS`; every model descriptor
``codegen/models/<x>.yaml`` produces ``hyper_parallel/models/<model>/config_registry.py``
(:func:`model_outputs`); every example YAML ``examples/yaml/<x>.yaml`` becomes
``recipes/<x>.py`` through ``--from-yaml`` (:func:`example_recipes`).

A file's header hashes only its own inputs (:func:`input_parts`): the table (and the descriptor
of a registry), its template and the templates it includes, the generator modules that produce
it, the introspected schema it reads and black's version. "The generator modules that produce
it" is a declared list per output -- the module computing its template context and every module
of the package it imports (the YAML loader of ``utils/`` too), plus the framing every file gets
(:mod:`.framing`, :mod:`.templating`) -- and ``tests/codegen/test_inputs.py`` fails when a list
and the imports disagree. So editing ``migration/from_yaml.py`` rewrites no header, and editing
``rendering/adapter_context.py`` rewrites only the adapter's.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hyper_parallel.codegen.rendering import (
    adapter_context,
    reference_context,
    registry_context,
    sections_context,
)
from hyper_parallel.codegen.rendering.framing import sha
from hyper_parallel.codegen.rendering.templating import TEMPLATES
from hyper_parallel.codegen.table import descriptors
from hyper_parallel.codegen.table.coverage import Resolved

TABLE = "codegen/field_table.yaml"
GENERATOR = "hyper_parallel/codegen"
PACKAGE = "hyper_parallel"
#: Every legacy YAML here has its recipe in RECIPES (examples/yaml/x.yaml -> recipes/x.py).
EXAMPLES = "examples/yaml"
RECIPES = "recipes"

# What produces each output, module by module (see the module docstring; a test keeps these
# lists equal to what the modules import). Paths under hyper_parallel/, without ".py"; the
# legacy schema and the component Configs they read are hashed as the schema part instead.
_READING_THE_TABLE = ("codegen/errors",) + tuple(f"codegen/table/{name}" for name in (
    "checked_yaml", "constraints", "coverage", "field_table", "introspect", "mapping_rows",
    "probes", "types")) + tuple(f"utils/{name}" for name in (
    "docstrings", "literal_keys", "suggest", "yaml_core", "yaml_lines"))
_FRAMING = tuple(f"codegen/rendering/{name}" for name in ("framing", "render", "templating"))
SECTIONS_MODULES = tuple(sorted(("codegen/rendering/sections_context", *_READING_THE_TABLE,
                                 *_FRAMING)))
ADAPTER_MODULES = tuple(sorted(("codegen/rendering/adapter_context", *_READING_THE_TABLE,
                                *_FRAMING)))
REFERENCE_MODULES = tuple(sorted(("codegen/rendering/reference_context", *_READING_THE_TABLE,
                                  *_FRAMING)))
REGISTRY_MODULES = tuple(sorted(("codegen/rendering/registry_context", "codegen/table/descriptors",
                                 "codegen/table/descriptor_recipes", *_READING_THE_TABLE,
                                 *_FRAMING)))


#: What an output reads of the legacy schema and the component Configs: nothing, the fields
#: (names and types: the adapter), or everything they say (defaults and docstrings too: the
#: reference). A header hashes only what its file reads, so a reworded docstring does not touch
#: the adapter.
NO_SCHEMA, FIELDS, DOCUMENTED = "-", "fields", "documented"


@dataclass(frozen=True)
class Output:
    """One generated file with a header: ``path`` (repo-relative), its ``template``, the
    ``context`` function giving the template's variables, the generator ``modules`` that
    produce it, whether it is Python (black-formatted, ``#`` header) and what it reads of the
    introspected schema (:data:`NO_SCHEMA`, :data:`FIELDS` or :data:`DOCUMENTED`).
    ``descriptor`` is set for a recipe module: the model descriptor it is generated from (its
    main input, named first in the header; the table is an input too)."""

    path: str
    template: str
    context: Callable[[Resolved], dict]
    modules: tuple[str, ...]
    python: bool
    schema: str
    descriptor: descriptors.ModelDescriptor | None = None

    @property
    def source(self) -> str:
        """The hand-edited file the output is generated from."""
        return self.descriptor.rel if self.descriptor is not None else TABLE

    @property
    def renderer(self) -> str:
        """The module computing the template context
        (``hyper_parallel.codegen.rendering.<name>``)."""
        return getattr(self.context, "func", self.context).__module__

    def inputs(self, repo: Path, black: str) -> list[str]:
        """The ``Inputs:`` line of the header."""
        names = [TABLE, *template_files(repo, self.template), *module_groups(self.modules)]
        d = self.descriptor
        if d is not None:
            names.insert(0, d.rel)
            names.append(f"component Configs, {d.flavor_table}, {d.factory} (introspected)")
        elif self.schema != NO_SCHEMA:
            names.append("hyper_parallel/trainer/config.py + components/*.py (introspected)")
        if self.python:
            names.append(f"black {black}")
        return names


OUTPUTS: tuple[Output, ...] = (
    Output("hyper_parallel/config/configs.py", "configs.py.j2",
           sections_context.configs_context, SECTIONS_MODULES, True, NO_SCHEMA),
    Output("hyper_parallel/trainer/trainer_config.py", "trainer_config.py.j2",
           sections_context.trainer_config_context, SECTIONS_MODULES, True, NO_SCHEMA),
    Output("hyper_parallel/config/legacy_adapter.py", "legacy_adapter.py.j2",
           adapter_context.legacy_adapter_context, ADAPTER_MODULES, True, FIELDS),
    Output("hyper_parallel/trainer/legacy_parsing/unsupported_keys.py",
           "unsupported_keys.py.j2", adapter_context.legacy_unsupported_context,
           ADAPTER_MODULES, True, NO_SCHEMA),
    Output("docs/config_reference.md", "config_reference.md.j2",
           reference_context.reference_context, REFERENCE_MODULES, False, DOCUMENTED),
)

REGISTRY_TEMPLATE = "config_registry.py.j2"


def model_outputs(models: list[descriptors.ModelDescriptor]) -> tuple[Output, ...]:
    """One recipe module per model descriptor."""
    return tuple(
        Output(d.output, REGISTRY_TEMPLATE,
               functools.partial(registry_context.config_registry_context, model=d),
               REGISTRY_MODULES, True, FIELDS, d)
        for d in models
    )


def example_recipes(repo: Path) -> dict[str, str]:
    """``{recipes/<x>.py: examples/yaml/<x>.yaml}`` for every example YAML."""
    folder = Path(repo) / EXAMPLES
    return {f"{RECIPES}/{path.stem}.py": f"{EXAMPLES}/{path.name}"
            for path in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def output_paths(repo: Path) -> list[str]:
    """Every path the generator writes: :data:`OUTPUTS`, one recipe module per descriptor (read
    without checking the descriptors) and one recipe per example YAML."""
    return ([o.path for o in OUTPUTS] + descriptors.output_paths(Path(repo))
            + list(example_recipes(repo)))


# ---------------------------------------------------------------------------------------------
# the input hashes
# ---------------------------------------------------------------------------------------------

#: A template naming another one (``{% include "x" %}``, ``import``, ``from``, ``extends``).
_REFERENCE = re.compile(r"{%-?\s*(?:include|import|from|extends)\s+[\"']([^\"']+)[\"']")


def template_files(repo: Path, template: str) -> list[str]:
    """``templates/<template>`` and every template it includes, directly or not, in order."""
    found: list[str] = []

    def visit(name: str) -> None:
        rel = f"{TEMPLATES}/{name}"
        if rel in found:
            return
        found.append(rel)
        path = Path(repo) / rel
        if path.is_file():
            for other in _REFERENCE.findall(path.read_text(encoding="utf-8")):
                visit(other)

    visit(template)
    return found


def files_hash(repo: Path, rels: list[str]) -> str:
    """One hash of the named files (name and content each)."""
    h = hashlib.sha256()
    for rel in rels:
        path = Path(repo) / rel
        h.update(rel.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"") + b"\0")
    return h.hexdigest()


def generator_hash(repo: Path, modules: tuple[str, ...]) -> str:
    """Hash of the named modules' source (``codegen/table/types`` is
    ``hyper_parallel/codegen/table/types.py``)."""
    return files_hash(repo, [f"{PACKAGE}/{name}.py" for name in modules])


def module_groups(modules: tuple[str, ...]) -> list[str]:
    """``hyper_parallel/codegen/table/{a,b}.py``-style names of ``modules``, one per folder
    (``hyper_parallel/codegen/errors.py`` for a folder's only module)."""
    folders: dict[str, list[str]] = {}
    for name in modules:
        folder, _, module = name.rpartition("/")
        folders.setdefault(folder, []).append(module)
    return [f"{PACKAGE}/{folder}/{names[0] if len(names) == 1 else '{' + ','.join(names) + '}'}.py"
            for folder, names in folders.items()]


def schema_hash(r: Resolved, documented: bool) -> str:
    """Hash of what the introspection read: the legacy fields and the component fields, in
    order, each with its type (and, ``documented``, its default and docstring)."""
    def fact(path: str, info) -> tuple:
        return (path, info.type, repr(info.default), info.doc) if documented else (path, info.type)

    facts = [repr([fact(p, i) for p, i in r.legacy.items()])]
    for slot in sorted(r.components):
        facts.append(repr([fact(n, i) for n, i in r.components[slot].items()]))
    return sha("\n".join(facts))


def input_parts(out: Output, repo: Path, r: Resolved, black: str) -> dict[str, str]:
    """The hash of each input of ``out``, by part (the header's ``Parts:`` without the body)."""
    parts = {"table": r.table.sha256}
    if out.descriptor is not None:
        parts["descriptor"] = out.descriptor.sha256
    parts["template"] = files_hash(repo, template_files(repo, out.template))
    parts["generator"] = generator_hash(repo, out.modules)
    if out.descriptor is not None:
        parts["schema"] = out.descriptor.schema
    else:
        parts["schema"] = (schema_hash(r, out.schema == DOCUMENTED) if out.schema != NO_SCHEMA
                           else NO_SCHEMA)
    if out.python:
        parts["black"] = black
    return parts
