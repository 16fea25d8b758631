"""Baselines of recipes converted from legacy YAMLs.

A legacy YAML states what differs from the legacy defaults, so the recipe ``--from-yaml`` writes
starts from :func:`flavor_baseline` -- the ``HyperTrainer.Config`` of an old YAML that names only
the model (and its flavor) -- and then sets, one line each, the fields the YAML changed. That
keeps a converted recipe as short as the YAML it came from, each line traceable to one key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["flavor_baseline"]


def flavor_baseline(model: str = "qwen3_5", flavor: str | None = None) -> HyperTrainer.Config:
    """The configuration of a legacy YAML holding only ``model.name: <model>`` and, when
    ``flavor`` is given, ``model.config_overrides: {flavor: <flavor>}``; every other field has
    its legacy default (``flavor=None`` is the model's default flavor).

    ``model_spec`` is the spec registered under ``<model>`` (the v2 spec the engine resolves by
    name), its model Config already fitted to the flavor, so a converted recipe is a new-world
    recipe from its first line; it trains exactly what ``model_spec=None`` would, which is why it
    still converts back to the legacy schema."""
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.models.spec import discover_model_spec
    from hyper_parallel.trainer.config import HyperTrainerConfig, ModelConfig

    overrides = None if flavor is None else {"flavor": flavor}
    legacy = HyperTrainerConfig(model=ModelConfig(name=model, config_overrides=overrides))
    config = legacy_to_trainer_config(legacy)
    spec = discover_model_spec(model)
    spec.model.update_from_config(trainer_config=config)
    config.model_spec = spec
    return config
