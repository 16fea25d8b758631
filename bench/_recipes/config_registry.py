"""Stand-in recipe for ``bench/bench_cli.py`` until ``hyper_parallel/models/qwen3_5_v2/
config_registry.py`` ships ``qwen3_5_v2_debugmodel`` (the bench prefers that one when it exists).

``debug_recipe()`` has the shape of torchtitan's ``llama3_debugmodel``, so the two command lines
parse trees of comparable weight: a model spec built by its factory, the optimizer's learning
rate, a warmup/decay schedule, training length and batch, a data loader, metrics and
checkpoint cadence, activation checkpointing and periodic validation.
"""

from __future__ import annotations

from hyper_parallel.components.checkpoint import CheckpointManager
from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.components.lr_scheduler import LRSchedulersContainer
from hyper_parallel.components.metrics import MetricsProcessor
from hyper_parallel.components.optimizer import OptimizersContainer
from hyper_parallel.config.configs import (
    ActivationCheckpointConfig,
    TrainingConfig,
    ValidationConfig,
)
from hyper_parallel.models.qwen3_5_v2.spec import qwen3_5_v2_spec_factory
from hyper_parallel.trainer.trainer_config import HyperTrainer


def debug_recipe() -> HyperTrainer.Config:
    """The qwen3_5_v2 debug model for 10 steps on dummy data (a fresh config per call)."""
    return HyperTrainer.Config(
        model_spec=qwen3_5_v2_spec_factory("debugmodel"),
        optimizer=OptimizersContainer.Config(lr=8e-4),
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=2, decay_style="linear"),
        training=TrainingConfig(local_batch_size=8, global_batch_size=8, seq_len=2048, steps=10),
        dataloader=BaseDataLoader.Config(dataset="dummy"),
        metrics=MetricsProcessor.Config(log_freq=1),
        checkpoint=CheckpointManager.Config(interval=10),
        activation_checkpoint=ActivationCheckpointConfig(mode="selective"),
        validation=ValidationConfig(freq=5, dataset_path="data/val.jsonl"),
    )
