"""The upstream image-text YAMLs' ``model.config_overrides`` keys: ``vl: true`` (the image-text
model) and a nested ``text_config`` (the text fields, as in Hugging Face's image-text
``config.json``), read by both entries as this model's own fields; wrong values are refused with
the file and line (legacy) or the field (recipe)."""

from __future__ import annotations

import pytest

from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
from hyper_parallel.models.qwen3_5.configuration import FLAVORS
from hyper_parallel.models.qwen3_5.model_config import flavor_config
from hyper_parallel.models.qwen3_5.vision_config import Qwen3_5VisionConfig
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
from hyper_parallel.trainer.config_parser import load_config

YAML = """\
model:
  name: qwen3_5
  config_overrides:
    flavor: 9b
{extra}"""


def _model(extra: str):
    legacy = load_config(HyperTrainerConfig, YAML.format(extra=extra), source="vl.yaml")
    config = legacy_to_trainer_config(legacy)
    model = flavor_config("0.8b")
    model.update_from_config(trainer_config=config)
    return model


def test_vl_true_is_the_image_text_model_and_text_config_its_text_fields():
    model = _model("    vl: true\n    text_config:\n      num_hidden_layers: 4\n")
    assert model.vision_config == Qwen3_5VisionConfig()  # the published tower
    assert model.num_hidden_layers == 4 and model.hidden_size == FLAVORS["9b"].hidden_size
    assert _model("    vl: false\n").vision_config is None
    on_vl = load_config(HyperTrainerConfig, YAML.replace("9b", "debugmodel_vl").format(
        extra="    vl: true\n"), source="vl.yaml")
    model = flavor_config("0.8b")
    model.update_from_config(trainer_config=legacy_to_trainer_config(on_vl))
    assert model.vision_config == FLAVORS["debugmodel_vl"].vision_config  # the flavor's tower


@pytest.mark.parametrize(("extra", "words"), [
    ("    vl: 'yes'\n", "vl.yaml:5: model.config_overrides.vl: expected true or false"),
    ("    text_config:\n      num_hiden_layers: 4\n",
     "vl.yaml:6: model.config_overrides.text_config.num_hiden_layers: unknown key"),
    ("    text_config: 4\n", "model.config_overrides.text_config: expected a mapping"),
])
def test_wrong_upstream_keys_name_file_and_line(extra, words):
    with pytest.raises(ConfigError) as info:
        load_config(HyperTrainerConfig, YAML.format(extra=extra), source="vl.yaml")
    assert words in str(info.value)


def test_upstream_keys_that_contradict_are_refused():
    from hyper_parallel.models.qwen3_5.model_section import upstream_overrides
    from hyper_parallel.utils.errors import ConfigError as Error

    with pytest.raises(Error, match="set both here and in text_config"):
        upstream_overrides({"hidden_size": 64, "text_config": {"hidden_size": 32}})
    with pytest.raises(Error, match="vl and vision_config are both set"):
        upstream_overrides({"vl": True, "vision_config": {"depth": 2}})
