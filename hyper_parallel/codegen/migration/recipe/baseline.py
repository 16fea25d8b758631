"""Where a converted recipe starts: its first line, ``config = <baseline>``.

The candidates are :func:`~hyper_parallel.config.baselines.flavor_baseline` of the model and
flavor the YAML names (the config of a YAML naming only those) and every registry recipe of the
same model (``hyper_parallel.models.<name>.config_registry``); :func:`choose_baseline` takes the
one that leaves the fewest lines to write. :func:`on_baseline_spec` keeps the recipe on the
baseline's model spec when that spec trains what the YAML's model name does, the model section
written as the baseline writes it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.migration import pyliteral
from hyper_parallel.codegen.migration.recipe import changes as recipe_changes

BASELINE_FUNCTION = ("hyper_parallel.config.baselines", "flavor_baseline")


@dataclass
class Baseline:
    """Where a recipe starts: the call, its import and the config it returns."""

    code: str
    imports: set[tuple[str, str]]
    config: Any
    described: str
    """What the report (and the docstring) call it: ``flavor_baseline: model 'qwen3_5', ...``."""
    keys: tuple[str, ...] = ()
    """The legacy keys the baseline expresses (for provenance)."""


def _flavor_keys(legacy: Any) -> tuple[str, ...]:
    flavor = (legacy.model.config_overrides or {}).get("flavor")
    return ("model.name",) + (("model.config_overrides.flavor",) if flavor is not None else ())


def flavor_candidate(legacy: Any) -> Baseline:
    """``flavor_baseline(<model.name>[, <flavor>])``."""
    flavor = (legacy.model.config_overrides or {}).get("flavor")
    return model_flavor_candidate(legacy.model.name, flavor, _flavor_keys(legacy))


def model_flavor_candidate(name: str, flavor: str | None, keys: tuple[str, ...] = ()
                           ) -> Baseline:
    """``flavor_baseline(name[, flavor])``; ``keys``: the legacy keys it expresses."""
    from hyper_parallel.config.baselines import flavor_baseline

    args = [pyliteral.literal(name, "model.name").text]
    if flavor is not None:
        args.append(pyliteral.literal(flavor, "model.config_overrides.flavor").text)
    what = f"model {name!r}" + (f", flavor {flavor!r}" if flavor is not None else
                                 " (its default flavor)")
    return Baseline(f"{BASELINE_FUNCTION[1]}({', '.join(args)})", {BASELINE_FUNCTION},
                    flavor_baseline(name, flavor), f"flavor_baseline: {what}", keys)


def registry_candidates(legacy: Any) -> list[Baseline]:
    """The registry recipes of the model the YAML names (``hyper_parallel.models.<name>.
    config_registry``), when that module exists."""
    return model_registry_candidates(legacy.model.name, _flavor_keys(legacy))


def model_registry_candidates(name: str, keys: tuple[str, ...] = ()) -> list[Baseline]:
    """The recipes of ``hyper_parallel.models.<name>.config_registry``, when it exists."""
    from hyper_parallel import models
    from hyper_parallel.config.recipes import available_recipes

    module_name = f"hyper_parallel.models.{name}.config_registry"
    # Look for the file rather than find_spec(): that would import the model package (torch,
    # DTensor) only to learn that it has no registry.
    if "." in name or not any((Path(folder) / name / "config_registry.py").is_file()
                              for folder in models.__path__):
        return []
    module = importlib.import_module(module_name)
    return [Baseline(f"{recipe}()", {(module_name, recipe)}, getattr(module, recipe)(),
                     f"registry recipe {module_name}.{recipe}", keys)
            for recipe in available_recipes(module)]


def choose_baseline(legacy: Any, target: Any) -> Baseline:
    """The candidate leaving the fewest lines to write; the flavor baseline on a tie."""
    candidates = [flavor_candidate(legacy)] + registry_candidates(legacy)
    scored = [(len(recipe_changes.field_changes(c.config, target)), i, c)
              for i, c in enumerate(candidates)]
    return min(scored, key=lambda item: item[:2])[2]


def on_baseline_spec(target: Any, baseline: Baseline) -> Any:
    """``target`` (converted from the YAML: no ``model_spec``, the legacy schema has none) on the
    baseline's spec when that spec trains the same model (``legacy_spec.spec_forms``), its model
    section written the way the baseline writes it where it can be (a registry recipe leaves
    ``model.name`` and the flavor to its spec, ``flavor_baseline`` states them as the YAML
    does): the recipe stays on the v2 spec and no line resets it or restates the model."""
    from hyper_parallel.config.legacy_spec import spec_forms

    spec = baseline.config.model_spec
    if target.model_spec is not None or spec is None:
        return target
    forms = spec_forms(target, spec)
    if not forms:
        return target
    scored = [(len(recipe_changes.field_changes(baseline.config, form)), i, form)
              for i, form in enumerate(forms)]
    return min(scored, key=lambda item: item[:2])[2]


__all__ = ["BASELINE_FUNCTION", "Baseline", "choose_baseline", "flavor_candidate",
           "model_flavor_candidate", "model_registry_candidates", "on_baseline_spec",
           "registry_candidates"]
