"""Recipes for the ConfigManager tests: ``--module _test_dummy --config qwen3_5_v2_tiny``.

It imports ``HyperTrainer`` from its old path, ``trainer_config``, as recipe files written before
the engine existed do: that path must keep giving the engine.
"""

from hyper_parallel.config.configs import ModelConfig, TrainingConfig
from hyper_parallel.trainer.trainer_config import HyperTrainer


def qwen3_5_v2_tiny() -> HyperTrainer.Config:
    """A tiny run: the debug flavor, 3 steps, short sequences."""
    return HyperTrainer.Config(
        model=ModelConfig(config_overrides={"flavor": "debugmodel"}),
        training=TrainingConfig(steps=3, seq_len=64, global_batch_size=2, local_batch_size=1),
    )


def qwen3_5_v2_tiny_tp2() -> HyperTrainer.Config:
    config = qwen3_5_v2_tiny()
    config.parallelism.tensor_parallel_degree = 2
    return config


def _private_helper() -> None:
    """Not a recipe: private names are never listed."""
