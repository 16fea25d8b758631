"""A ``model_spec`` in legacy terms (``hyper_parallel.config.legacy_spec``).

A recipe on a spec names the model and its flavor only in the spec. Converting to the legacy
schema derives ``model.name`` (the spec's name) and ``config_overrides['flavor']`` (the spec's
flavor, where the name alone would train another size) -- only when the legacy config trains
exactly what the spec trains. ``spec_forms`` goes the other way for the converter: every way of
writing a converted config on a spec that converts back to exactly that config.
"""

from __future__ import annotations

import copy

import pytest

from hyper_parallel.config.configs import ModelConfig
from hyper_parallel.config.legacy_adapter import (
    legacy_to_trainer_config,
    trainer_config_to_legacy,
)
from hyper_parallel.config.legacy_spec import spec_forms, without_registered_spec
from hyper_parallel.models.qwen3_5_v2 import config_registry as registry
from hyper_parallel.models.spec import discover_model_spec
from hyper_parallel.models.qwen3_5_v2.spec import qwen3_5_v2_spec_factory
from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.trainer.config import ModelConfig as LegacyModelConfig
from hyper_parallel.utils.errors import ConfigError


def _debug() -> object:
    config = registry.qwen3_5_v2_debugmodel()
    config.dump_folder = "."  # new-only: the legacy schema has no dump_folder
    return config


def _fitted(config) -> object:
    """The model Config the engine trains for ``config`` (the spec's, or the registered one's)."""
    spec = config.model_spec or discover_model_spec(config.model.name)
    model = copy.deepcopy(spec.model)
    model.update_from_config(trainer_config=config)
    return model


def test_the_recipe_states_the_model_once_and_converts_with_name_and_flavor():
    config = _debug()
    assert config.model == ModelConfig()
    legacy = trainer_config_to_legacy(config)
    assert (legacy.model.name, legacy.model.config_overrides) == ("qwen3_5_v2",
                                                                  {"flavor": "debugmodel"})
    # The legacy config trains what the recipe trains.
    back = legacy_to_trainer_config(legacy)
    assert back.model_spec is None
    assert _fitted(back) == _fitted(config)


def test_the_default_flavor_needs_no_flavor_key():
    config = registry.qwen3_5_v2_0_8b()
    section = without_registered_spec(config).model
    assert (section.name, section.config_overrides) == ("qwen3_5_v2", None)


def test_real_overrides_stay_beside_the_derived_flavor():
    config = _debug()
    config.model.config_overrides = {"num_hidden_layers": 2}
    legacy = trainer_config_to_legacy(config)
    assert legacy.model.config_overrides == {"flavor": "debugmodel", "num_hidden_layers": 2}
    assert _fitted(legacy_to_trainer_config(legacy)) == _fitted(config)
    assert _fitted(config).num_hidden_layers == 2


def test_a_flavor_key_that_re_bases_the_spec_is_kept():
    # The engine re-bases the spec's model on the key's flavor; so does the legacy config.
    config = _debug()
    config.model.config_overrides = {"flavor": "0.8b"}
    legacy = trainer_config_to_legacy(config)
    assert legacy.model.config_overrides == {"flavor": "0.8b"}
    assert _fitted(legacy_to_trainer_config(legacy)) == _fitted(config)


def test_model_name_beside_a_spec_is_not_what_converts():
    # The engine trains the spec whatever model.name says; the conversion writes the spec's name.
    config = _debug()
    config.model.name = "qwen3_5"
    assert trainer_config_to_legacy(config).model.name == "qwen3_5_v2"


def test_a_spec_no_registered_name_trains_does_not_convert():
    config = _debug()
    config.model_spec.model.num_hidden_layers = 1  # edited: neither flavor nor override says so
    assert without_registered_spec(config) is config
    with pytest.raises(ConfigError) as info:
        trainer_config_to_legacy(config)
    assert info.value.path == "model_spec"


def _converted(name: str, overrides: dict | None) -> object:
    legacy = HyperTrainerConfig(model=LegacyModelConfig(name=name, config_overrides=overrides))
    return legacy_to_trainer_config(legacy)


def test_spec_forms_leave_name_and_flavor_to_the_spec_first():
    target = _converted("qwen3_5_v2", {"flavor": "debugmodel"})
    forms = spec_forms(target, qwen3_5_v2_spec_factory("debugmodel"))
    assert forms[0].model == ModelConfig()  # the fewest statements: the spec says both
    assert forms[-1].model == target.model  # the YAML's own spelling is one of them
    for form in forms:
        assert form.model_spec is not None
        assert without_registered_spec(form) == target


def test_spec_forms_keep_a_flavor_the_yaml_states_at_its_default():
    # `flavor: 0.8b` written out: dropping it would convert back to a YAML without the key.
    target = _converted("qwen3_5_v2", {"flavor": "0.8b"})
    forms = spec_forms(target, qwen3_5_v2_spec_factory("0.8b"))
    assert forms and all(f.model.config_overrides == {"flavor": "0.8b"} for f in forms)


def test_spec_forms_of_another_model_are_none():
    # A YAML naming no flavor trains the default size, not the spec's debug model...
    assert spec_forms(_converted("qwen3_5_v2", None), qwen3_5_v2_spec_factory("debugmodel")) == []
    # ...and a spec under another name converts to that name, not the YAML's.
    assert spec_forms(_converted("qwen3_5", {"flavor": "debugmodel"}),
                      qwen3_5_v2_spec_factory("debugmodel")) == []
    # A flavor key re-bases whatever the spec holds, so it keeps the key (and only that form).
    target = _converted("qwen3_5_v2", {"flavor": "debugmodel"})
    forms = spec_forms(target, qwen3_5_v2_spec_factory("0.8b"))
    assert forms and all(f.model.config_overrides == {"flavor": "debugmodel"} for f in forms)
