"""The template context of ``hyper_parallel/models/<model>/config_registry.py``: the named recipes
of a model descriptor (:mod:`.descriptors`), each a zero-argument function returning a fresh
``HyperTrainer.Config`` that states only what differs from its baseline.
"""

from __future__ import annotations

import decimal
import re
from typing import Any

from hyper_parallel.codegen.rendering.render import docstring
from hyper_parallel.codegen.table.coverage import Resolved
from hyper_parallel.codegen.table.descriptor_recipes import Recipe, Setting
from hyper_parallel.codegen.table.descriptors import ModelDescriptor

#: Where the generated section classes and the engine, ``HyperTrainer``, live (recipe modules
#: import them; the engine's module is framework-free to import).
CONFIGS_MODULE = "hyper_parallel.config.configs"
ENGINE_MODULE = "hyper_parallel.trainer.hyper_trainer"


# ---------------------------------------------------------------------------------------------
# hyper_parallel/models/<model>/config_registry.py
# ---------------------------------------------------------------------------------------------



def natural_key(name: str) -> tuple:
    """Sort key comparing digit runs as numbers (``35b`` before ``122b``), as ruff's isort-style
    ``__all__`` order (RUF022) does."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", name))

def docstring_paragraphs(text: str, indent: int) -> str:
    """Paragraphs (one per line of ``text``) wrapped for a docstring, a blank line between."""
    return ("\n\n" + " " * indent).join(docstring(p, indent) for p in text.split("\n") if p)


def _float(value: float) -> str:
    """A float as a person writes it: ``3e-4`` rather than ``0.0003`` for small magnitudes (the
    text round-trips to the same float), ``repr`` otherwise."""
    text = repr(value)
    if value == 0 or abs(value) >= 0.01 or "inf" in text or "nan" in text:
        return text
    sign, digits, exponent = decimal.Decimal(text).as_tuple()
    mantissa = "".join(map(str, digits)).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    short = ("-" if sign else "") + mantissa[0] + (f".{mantissa[1:]}" if len(mantissa) > 1
                                                   else "") + f"e{power}"
    return short if float(short) == value else text


def _value(value: Any) -> str:
    """Source of a descriptor value (black then turns the quotes into double quotes)."""
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, tuple):
        items = [_value(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(_value(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_value(k)}: {_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _base_recipe_call(r: Resolved, model: ModelDescriptor, recipe: Recipe,
                      imports: dict[str, set[str]]) -> list[str]:
    """The keyword arguments of ``HyperTrainer.Config(...)`` for a base recipe: the spec, then
    every section / component / root field the recipe sets, in the tree's order."""
    t = r.table
    grouped: dict[str, list[Setting]] = {}
    for s in recipe.settings:
        grouped.setdefault(r.new[s.path].container, []).append(s)
    root_values = {s.path: s.value for s in grouped.get("", [])}
    kwargs = [f"model_spec={model.factory}({recipe.flavor!r})"]
    for entry in t.root:
        if entry.kind == "field":
            if entry.name in root_values:
                kwargs.append(f"{entry.name}={_value(root_values[entry.name])}")
            continue
        settings = grouped.get(entry.name)
        if not settings:
            continue  # the section's default_factory gives its defaults
        if entry.kind == "section":
            cls = t.section(entry.name).cls
            imports.setdefault(CONFIGS_MODULE, set()).add(cls)
        else:
            c = t.component(entry.name)
            imports.setdefault(c.module, set()).add(c.owner)
            cls = f"{c.owner}.Config"
        args = ", ".join(f"{r.new[s.path].name}={_value(s.value)}" for s in settings)
        kwargs.append(f"{entry.name}={cls}({args})")
    return kwargs


def config_registry_context(r: Resolved, model: ModelDescriptor) -> dict[str, Any]:
    imports: dict[str, set[str]] = {ENGINE_MODULE: {"HyperTrainer"}}
    recipes = []
    for recipe in model.recipes:
        doc = docstring_paragraphs(recipe.doc, 4)
        # A docstring of several lines closes on a line of its own (PEP 257).
        item: dict[str, Any] = {"name": recipe.name, "base": recipe.base,
                                "doc": doc + ("\n    " if "\n" in doc else "")}
        if recipe.base is None:
            imports.setdefault(model.factory_module, set()).add(model.factory)
            item["kwargs"] = _base_recipe_call(r, model, recipe, imports)
        else:
            item["assignments"] = [f"config.{s.path} = {_value(s.value)}"
                                   for s in recipe.settings]
        recipes.append(item)
    paragraphs = [
        (f"Training recipes of ``{model.name}``: one zero-argument function per recipe, each "
         "returning a fresh ``HyperTrainer.Config``."),
        model.doc,
        (f"Run one with ``--module {model.name} --config <recipe>`` and override any field on "
         "the command line (``--training.steps=10``). A recipe derived from another calls it "
         "and changes only what differs; a base recipe states only the values that are not "
         "defaults."),
        f"Generated from ``{model.rel}``; edit the descriptor, not this file.",
    ]
    module_doc = docstring_paragraphs("\n".join(paragraphs), 0)
    return {
        "module_doc": module_doc,
        "imports": [f"from {module} import {', '.join(sorted(names))}"
                    for module, names in sorted(imports.items())],
        "exports": sorted((recipe.name for recipe in model.recipes), key=natural_key),
        "recipes": recipes,
    }
