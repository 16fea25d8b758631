"""A ``model_spec`` in the legacy schema's terms: the spec names the model and its flavor.

A recipe on a spec (``model_spec=qwen3_5_v2_spec_factory("debugmodel")``) states the model once,
in the spec: the engine trains the spec and reads no name from ``model.name`` (it only checks
that one names a model, see ``models.spec.resolve_model_spec``), and ``model.config_overrides``
carries only real overrides. The legacy schema has no spec, so converting back writes what the
spec stands for: ``model.name`` is the spec's name and, when the spec's model is not what that
name trains by default, ``config_overrides['flavor']`` is the spec's flavor.

* :func:`without_registered_spec` -- that conversion (the generated adapter's first step towards
  the legacy schema, and ``--to-yaml``'s): ``model_spec`` unset and the model section naming
  what it trained, when a legacy config trains exactly the same; otherwise ``config`` unchanged
  (and the adapter refuses the spec, a ``new_only`` field).
* :func:`spec_forms` -- the reverse, for the converter (``--from-yaml``): a config converted
  from a YAML (no spec) put on a spec, each way of writing its model section that converts back
  to exactly that config, the fewest statements first.

"Exactly the same" is decided by building nothing: the spec registered under the name has the
same hooks, and the two model Configs are equal once each has met the run
(``update_from_config``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hyper_parallel.config.adapter_support import field_default

__all__ = ["FLAVOR_KEY", "spec_forms", "without_registered_spec"]

FLAVOR_KEY = "flavor"
"""The key of ``model.config_overrides`` that re-bases the model on a named flavor (the legacy
model section's only way of naming one)."""

#: ``ModelSpec`` fields that are not hooks: what the spec is called and its model Config (the
#: model is compared once fitted to the run).
_SPEC_NOT_HOOKS = ("name", "flavor", "model")


def _fitted_model(spec: Any, config: Any) -> Any:
    """``spec.model`` after ``update_from_config(config)``, on a copy (None if it fails)."""
    model = copy.deepcopy(spec.model)
    if model is None:
        return None
    try:
        model.update_from_config(trainer_config=config)
    except Exception:  # noqa: BLE001 - an invalid combination trains nowhere: equivalent to nothing
        return None
    return model


def _trains_the_same(config: Any, legacy_like: Any) -> bool:
    """Whether ``legacy_like`` (no spec) trains what ``config`` (on its spec) trains: the spec
    registered under ``legacy_like.model.name`` has the spec's hooks and, fitted to
    ``legacy_like``, the model Config the spec has fitted to ``config``."""
    from hyper_parallel.models.spec import discover_model_spec

    spec = config.model_spec
    try:
        registered = discover_model_spec(legacy_like.model.name)
    except (ImportError, ValueError):
        return False
    hooks = [f.name for f in dataclasses.fields(spec) if f.name not in _SPEC_NOT_HOOKS]
    if any(getattr(spec, hook) != getattr(registered, hook, None) for hook in hooks):
        return False
    mine = _fitted_model(spec, config)
    return mine is not None and mine == _fitted_model(registered, legacy_like)


def _named_sections(model: Any, spec: Any) -> list[Any]:
    """The model sections a legacy config could write for ``spec``: its name, the overrides as
    given, then (when they name no flavor) the spec's flavor first among them."""
    sections = [dataclasses.replace(model, name=spec.name)]
    overrides = model.config_overrides or {}
    if spec.flavor is not None and FLAVOR_KEY not in overrides:
        sections.append(dataclasses.replace(
            model, name=spec.name, config_overrides={FLAVOR_KEY: spec.flavor, **overrides}))
    return sections


def without_registered_spec(config: Any) -> Any:
    """``config`` without ``model_spec``, its model section naming the spec (``model.name`` the
    spec's name, ``config_overrides['flavor']`` its flavor where the name alone would train
    another size), when that trains exactly what the spec trains; ``config`` itself when it has
    no spec or no legacy config can say what the spec trains. A shallow copy."""
    if config.model_spec is None:
        return config
    for section in _named_sections(config.model, config.model_spec):
        candidate = dataclasses.replace(config, model=section, model_spec=None)
        if _trains_the_same(config, candidate):
            return candidate
    return config


def spec_forms(config: Any, spec: Any) -> list[Any]:
    """``config`` (no ``model_spec``) on ``spec``, in every form that converts back to exactly
    ``config`` (:func:`without_registered_spec`), the fewest statements first: ``model.name``
    at its default and no ``config_overrides['flavor']`` where the spec says them. Empty when
    ``spec`` trains something else."""
    model = config.model
    names = list(dict.fromkeys((field_default(type(model), "name"), model.name)))
    overrides = model.config_overrides
    unflavored = {k: v for k, v in (overrides or {}).items() if k != FLAVOR_KEY} or None
    choices = [unflavored] + ([overrides] if overrides != unflavored else [])
    forms = []
    for name in names:
        for chosen in choices:
            section = dataclasses.replace(model, name=name, config_overrides=copy.deepcopy(chosen))
            candidate = dataclasses.replace(config, model=section, model_spec=spec)
            if without_registered_spec(candidate) == config:
                forms.append(candidate)
    return forms
