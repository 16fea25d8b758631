"""Recipe train_qwen3_5_debug, converted from examples/yaml/train_qwen3_5_debug.yaml
(sha256 57bfe757897eed3830dc11c7d4bfa1379de65a9d23649d570f14d8c1ece3c2af).

The YAML's header comment:

    Qwen3.5 debug model on synthetic tokens, one process.
      torchrun --nproc_per_node 1 scripts/train_lm.py examples/yaml/train_qwen3_5_debug.yaml

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module recipes.train_qwen3_5_debug --config train_qwen3_5_debug

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_debug.yaml``. It starts from flavor_baseline: model 'qwen3_5',
flavor 'debugmodel' and sets, one line each in the order of ``HyperTrainer.Config``, the fields
the YAML changes, each commented with the legacy key and line it comes from and the YAML's own
comment on that key. Before writing, the converter executed this module and checked that
``trainer_config_to_legacy(train_qwen3_5_debug())`` equals the canonical form of the YAML.

The YAML's comments on keys that no line sets:

* data.type (line 8): random tokens, deterministic per sample index
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["train_qwen3_5_debug"]


def train_qwen3_5_debug() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 4-6): ~5M parameters, trains in seconds on a CPU
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.shuffle = False  # data.shuffle (line 10)
    config.dataloader.pin_memory = False  # data.pin_memory (line 12)
    config.optimizer.lr = 0.001  # train.optimizer.lr (line 24)
    config.optimizer.betas = (0.9, 0.95)  # train.optimizer.betas (line 30)
    config.lr_scheduler.warmup_steps = 2  # train.optimizer.lr_warmup_ratio (line 27)
    config.lr_scheduler.lr_min = 0.0001  # train.optimizer.lr_min (line 25)
    config.checkpoint.folder = "outputs/qwen3_5_debug"  # train.checkpoint.output_dir (line 34)
    # train.checkpoint.save_steps (line 35): no checkpoints for a smoke run
    config.checkpoint.interval = 0
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 36)
    config.metrics.log_freq = 1  # train.logging.log_steps (line 38)
    config.training.steps = 10  # train.max_steps (line 14)
    config.training.global_batch_size = 4  # train.global_batch_size (line 15)
    # train.micro_batch_size (line 16): 2 micro-batches per step (gradient accumulation)
    config.training.local_batch_size = 2
    config.training.seq_len = 128  # data.max_seq_len (line 9)
    config.parallelism.data_parallel_shard_degree = 1  # train.accelerator.dp_shard (line 21)
    config.comm.backend = "gloo"  # train.comm_backend (line 19)
    config.debug.seed = 1234  # train.seed (line 17)
    config.debug.deterministic = True  # train.debug.deterministic (line 41)
    config.debug.check_nan_inf = True  # train.debug.check_nan_inf (line 42)
    return config
