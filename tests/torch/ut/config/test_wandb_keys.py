"""The legacy Weights & Biases keys: ``train.wandb.*`` map onto ``metrics.*``;
``train.logging.report_to: wandb`` is another spelling of ``train.wandb.enabled: true``
(canonicalized to it, with the reason), and ``report_to`` takes nothing else."""

from __future__ import annotations

import pytest

from hyper_parallel.config.legacy_adapter import (
    canonicalize_legacy,
    legacy_to_trainer_config,
    trainer_config_to_legacy,
)
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
from hyper_parallel.trainer.config_parser import load_config


def _legacy(text: str) -> HyperTrainerConfig:
    return load_config(HyperTrainerConfig, text, source="old.yaml")


def test_the_wandb_section_maps_onto_the_metrics_fields():
    config = legacy_to_trainer_config(_legacy(
        "train:\n  wandb:\n    enabled: true\n    project: mine\n    run_name: run1\n"
        "    log_steps: 5\n"))
    m = config.metrics
    assert (m.enable_wandb, m.wandb_project, m.wandb_run_name, m.wandb_log_freq) == (
        True, "mine", "run1", 5)
    back = trainer_config_to_legacy(config).train.wandb
    assert (back.enabled, back.project, back.run_name, back.log_steps) == (True, "mine", "run1", 5)


def test_report_to_wandb_switches_it_on_and_is_written_as_enabled():
    legacy = _legacy("train:\n  logging:\n    report_to: wandb\n")
    assert legacy_to_trainer_config(legacy).metrics.enable_wandb is True
    canon, notes = canonicalize_legacy(legacy)
    assert (canon.train.logging.report_to, canon.train.wandb.enabled) == ("none", True)
    assert {n.field for n in notes} == {"train.logging.report_to", "train.wandb.enabled"}
    assert trainer_config_to_legacy(legacy_to_trainer_config(legacy)) == canon


@pytest.mark.parametrize(("value", "words"), [
    ("tensorboard", "TensorBoard is switched on with train.tensorboard.enabled"),
    ("wandbb", "did you mean 'wandb'"),
])
def test_report_to_takes_none_or_wandb(value, words):
    with pytest.raises(ConfigError) as info:
        _legacy(f"train:\n  logging:\n    report_to: {value}\n")
    message = str(info.value)
    assert "old.yaml:3" in message and "train.logging.report_to" in message and words in message


@pytest.mark.parametrize(("key", "value"), [("project", '""'), ("run_name", '""'),
                                            ("log_steps", "0")])
def test_the_wandb_keys_are_checked(key, value):
    with pytest.raises(ConfigError, match=f"train.wandb.{key}"):
        _legacy(f"train:\n  wandb:\n    {key}: {value}\n")
