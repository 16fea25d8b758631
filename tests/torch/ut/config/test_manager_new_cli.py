"""``ConfigManager.parse_args`` on the new command line (``--module ... --config ...``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.config.recipes import RecipeError
from hyper_parallel.trainer.config import ConfigError
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

HERE = Path(__file__).parent


def parse(*overrides: str, config: str = "qwen3_5_v2_tiny"):
    return ConfigManager().parse_args(["--module", "_test_dummy", "--config", config, *overrides])


def test_override_applies():
    cfg = parse("--training.steps=5")
    assert isinstance(cfg, HyperTrainer.Config)
    assert cfg.training.steps == 5
    assert cfg.training.seq_len == 64  # from the recipe
    assert cfg.model.config_overrides == {"flavor": "debugmodel"}


def test_precedence_cli_over_recipe_over_defaults():
    cfg = parse("--optimizer.lr", "0.003", "--parallelism.tensor_parallel_degree", "2")
    assert cfg.optimizer.lr == 0.003
    assert cfg.parallelism.tensor_parallel_degree == 2
    assert cfg.training.global_batch_size == 2  # recipe
    assert cfg.dump_folder == HyperTrainer.Config().dump_folder  # default


def test_recipe_returns_a_fresh_config_each_time():
    a, b = parse(), parse()
    a.training.steps = 99
    assert b.training.steps == 3


def test_comma_separated_lists():
    cfg = parse("--compile.components", "model,loss")
    assert cfg.compile.components == ["model", "loss"]
    assert parse("--compile.components=").compile.components == []


def test_tuples_are_comma_separated_too():
    cfg = parse("--optimizer.betas=0.8,0.9", "--optimizer.no_decay_keywords", "bias,norm")
    assert cfg.optimizer.betas == (0.8, 0.9)
    assert cfg.optimizer.no_decay_keywords == ("bias", "norm")
    assert parse("--training.freeze_modules=embed,norm").training.freeze_modules == ["embed", "norm"]
    assert parse("--training.freeze_modules=none").training.freeze_modules is None
    with pytest.raises(ConfigError, match="expected 2 comma-separated values"):
        parse("--optimizer.betas=0.9")


@pytest.mark.parametrize("argv, expected", [
    (["--compile.enable"], True),
    (["--compile.enable=true"], True),
    (["--compile.enable=True"], True),
    (["--compile.enable", "true"], True),
    (["--compile.enable", "False"], False),
    (["--compile.enable=false"], False),
    (["--compile.enable", "--no-compile.enable"], False),
    (["--no-compile.enable", "--compile.enable"], True),
    (["--compile.no-enable"], False),
    (["--compile.no_enable"], False),
])
def test_boolean_forms(argv, expected):
    assert parse(*argv).compile.enable is expected


@pytest.mark.parametrize("argv, expected", [
    (["--optimizer.fused"], True),
    (["--no-optimizer.fused"], False),
    (["--optimizer.fused=false"], False),
    (["--optimizer.fused", "none"], None),
    (["--optimizer.fused=null"], None),
    (["--optimizer.fused=True", "--training.steps=4"], True),
])
def test_optional_boolean_forms(argv, expected):
    cfg = parse(*argv)
    assert cfg.optimizer.fused is expected


def test_a_bare_boolean_does_not_eat_the_next_flag():
    cfg = parse("--compile.enable", "--training.steps", "4")
    assert cfg.compile.enable is True and cfg.training.steps == 4


def test_a_field_starting_with_no_is_not_a_negation():
    cfg = parse("--optimizer.no-decay-keywords=bias")
    assert cfg.optimizer.no_decay_keywords == ("bias",)


def test_bad_override_names_the_flag():
    with pytest.raises(ConfigError) as info:
        parse("--training.stepz=5")
    assert "--training.stepz" in str(info.value)
    assert "did you mean '--training.steps'" in str(info.value)


def test_invalid_value_is_rejected():
    with pytest.raises(ConfigError, match=r"^--training.steps=0: must be >= 1"):
        parse("--training.steps=0")


def test_model_spec_is_hidden_from_the_cli(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    out = capsys.readouterr().out
    assert "--training.steps" in out
    assert "--model-spec" not in out and "--model_spec" not in out
    # Field docstrings are the help text.
    assert "Number of optimizer steps" in out or "optimizer steps" in out


def test_missing_recipe_lists_available():
    with pytest.raises(RecipeError) as info:
        parse(config="nope")
    message = str(info.value)
    assert "qwen3_5_v2_tiny" in message and "qwen3_5_v2_tiny_tp2" in message
    assert "_private_helper" not in message


def test_module_main_prints_the_config():
    proc = subprocess.run(
        # -W error: runpy must not find the module imported by its package first.
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "hyper_parallel.config.manager",
         "--module", "_test_dummy",
         "--config", "qwen3_5_v2_tiny", "--training.steps=7"],
        capture_output=True, text=True, check=False,
        env={"PYTHONPATH": f"{HERE}:{Path.cwd()}", "PATH": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert "steps: 7" in proc.stdout


def test_dict_fields_take_one_yaml_mapping():
    cfg = parse("--model.config_overrides", "{flavor: debugmodel, num_hidden_layers: 2}")
    assert cfg.model.config_overrides == {"flavor": "debugmodel", "num_hidden_layers": 2}
    assert parse("--model.config_overrides", "null").model.config_overrides is None
    with pytest.raises(ConfigError, match="--model.config_overrides=.*expected a mapping"):
        parse("--model.config_overrides", "[1, 2]")


def test_config_before_module_and_overrides_anywhere():
    cfg = ConfigManager().parse_args(["--config=qwen3_5_v2_tiny", "--training.steps=7",
                                      "--module", "_test_dummy"])
    assert cfg.training.steps == 7 and cfg.training.seq_len == 64


@pytest.mark.parametrize("argv, recipe", [
    (["--module", "m", "--config", "c"], True),
    (["--config", "c", "--module", "m"], True),
    (["--training.steps=3", "--module=m", "--config=c"], True),
    (["old.yaml", "--train.max_steps=3"], False),
    (["--train.max_steps=3"], False),  # a legacy line without its YAML: the legacy error
    ([], False),
])
def test_which_command_line(argv, recipe):
    from hyper_parallel.config.manager import is_recipe_command_line

    assert is_recipe_command_line(argv) is recipe
