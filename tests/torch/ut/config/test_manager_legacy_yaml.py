"""The legacy command line through ``ConfigManager``: same parser, then the generated adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config, trainer_config_to_legacy
from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = sorted((REPO / "examples" / "yaml").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_same_yaml_two_ways(path):
    legacy = parse_args(HyperTrainerConfig, [str(path)])
    new = ConfigManager().parse_args([str(path)])
    assert isinstance(new, HyperTrainer.Config)
    assert new == legacy_to_trainer_config(legacy)
    assert trainer_config_to_legacy(new) == legacy  # the examples are canonical


def test_overrides_reach_the_new_tree(tmp_path):
    path = EXAMPLES[0]
    new = ConfigManager().parse_args([str(path), "--train.max_steps=7", "--train.seed=3"])
    assert (new.training.steps, new.debug.seed) == (7, 3)


def test_legacy_errors_are_unchanged(tmp_path):
    bad = tmp_path / "old.yaml"
    bad.write_text("train:\n  optimizer:\n    lr: -1\n")
    with pytest.raises(ConfigError, match=r"old.yaml:3: train.optimizer.lr: must be >= 0"):
        ConfigManager().parse_args([str(bad)])


def test_every_legacy_problem_reaches_the_manager_at_once(tmp_path):
    bad = tmp_path / "old.yaml"
    bad.write_text("model:\n  config_overrides: {head_dimm: 64}\ntrain:\n  optimizer:\n    lr: .inf\n")
    with pytest.raises(ConfigError) as info:
        ConfigManager().parse_args([str(bad), "--train.sed=1"])
    assert [(p.path, p.location) for p in info.value.problems] == [
        ("model.config_overrides.head_dimm", f"{bad}:2"),
        ("train.optimizer.lr", f"{bad}:5"),
        ("train.sed", "command line (--train.sed=1)"),
    ]
    assert str(info.value).startswith(f"3 problems in {bad}:\n")


def test_an_empty_legacy_yaml_is_refused_by_the_manager(tmp_path):
    empty = tmp_path / "old.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="empty configuration"):
        ConfigManager().parse_args([str(empty)])
