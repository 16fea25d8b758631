"""Recipes of ``bench/bench_moe.py``'s expert-parallel figure: the ``qwen3_5_moe`` debug model on
dummy tokens, metrics every step, no checkpoints, one function per layout.

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module bench._moe_recipes --config moe_1_rank
    torchrun --nproc_per_node 2 -m hyper_parallel.train --module bench._moe_recipes --config moe_ep2

Every layout trains the same global batch (``BATCH`` sequences of ``SEQ_LEN`` tokens a step),
so their step times compare directly. The bench overrides ``--training.steps`` and
``--dump_folder``.
"""

from __future__ import annotations

from hyper_parallel.components.checkpoint import CheckpointManager
from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.components.metrics import MetricsProcessor
from hyper_parallel.components.optimizer import OptimizersContainer
from hyper_parallel.config.configs import TrainingConfig
from hyper_parallel.models.qwen3_5_moe.spec import qwen3_5_moe_spec_factory
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["moe_1_rank", "moe_ep2", "moe_fsdp2"]

BATCH = 4
SEQ_LEN = 256


def moe_1_rank() -> HyperTrainer.Config:
    """The MoE debug model on one rank: 4 x 256 tokens a step, fp32, constant LR."""
    return HyperTrainer.Config(
        model_spec=qwen3_5_moe_spec_factory("debugmodel"),
        dataloader=BaseDataLoader.Config(dataset="dummy", shuffle=False, pin_memory=False),
        optimizer=OptimizersContainer.Config(lr=1e-3, weight_decay=0.0),
        checkpoint=CheckpointManager.Config(interval=0, export_hf=False),
        metrics=MetricsProcessor.Config(log_freq=1),
        training=TrainingConfig(
            steps=20, global_batch_size=BATCH, local_batch_size=BATCH, seq_len=SEQ_LEN
        ),
    )


def moe_ep2() -> HyperTrainer.Config:
    """Expert parallelism over 2 ranks (4 experts each); both ranks load the same 4 sequences
    and each trains on half of the rows."""
    config = moe_1_rank()
    config.parallelism.expert_parallel_degree = 2
    return config


def moe_fsdp2() -> HyperTrainer.Config:
    """FSDP over 2 ranks (every expert on both), 2 sequences each: the 2-rank layout without
    expert parallelism, for reference."""
    config = moe_1_rank()
    config.parallelism.data_parallel_shard_degree = 2
    config.training.local_batch_size = BATCH // 2
    return config
