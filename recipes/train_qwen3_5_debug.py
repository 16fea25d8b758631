"""Recipe train_qwen3_5_debug, converted from examples/yaml/train_qwen3_5_debug.yaml
(sha256 57bfe757897eed3830dc11c7d4bfa1379de65a9d23649d570f14d8c1ece3c2af).

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module recipes.train_qwen3_5_debug --config train_qwen3_5_debug

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_debug.yaml``. It starts from flavor_baseline: model 'qwen3_5',
flavor 'debugmodel' and sets, one line each, the fields the YAML changes, commented with the
legacy key and the line they come from. Before writing, the converter executed this module and
checked that ``_trainer_config_to_legacy(train_qwen3_5_debug())`` equals the canonical form of
the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["train_qwen3_5_debug"]


def train_qwen3_5_debug() -> HyperTrainer.Config:
    # Qwen3.5 debug model on synthetic tokens, one process.
    #   torchrun --nproc_per_node 1 scripts/train_lm.py examples/yaml/train_qwen3_5_debug.yaml
    # ~5M parameters, trains in seconds on a CPU
    # train_qwen3_5_debug.yaml:4-6 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    # random tokens, deterministic per sample index
    config.training.seq_len = 128  # train_qwen3_5_debug.yaml:9 data.max_seq_len
    config.dataloader.shuffle = False  # train_qwen3_5_debug.yaml:10 data.shuffle
    config.dataloader.pin_memory = False  # train_qwen3_5_debug.yaml:12 data.pin_memory
    config.training.steps = 10  # train_qwen3_5_debug.yaml:14 train.max_steps
    config.training.global_batch_size = 4  # train_qwen3_5_debug.yaml:15 train.global_batch_size
    # 2 micro-batches per step (gradient accumulation)
    config.training.local_batch_size = 2  # train_qwen3_5_debug.yaml:16 train.micro_batch_size
    config.debug.seed = 1234  # train_qwen3_5_debug.yaml:17 train.seed
    config.comm.backend = "gloo"  # train_qwen3_5_debug.yaml:19 train.comm_backend
    # train_qwen3_5_debug.yaml:21 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 1
    config.optimizer.lr = 0.001  # train_qwen3_5_debug.yaml:24 train.optimizer.lr
    config.lr_scheduler.lr_min = 0.0001  # train_qwen3_5_debug.yaml:25 train.optimizer.lr_min
    # train_qwen3_5_debug.yaml:27 train.optimizer.lr_warmup_ratio
    config.lr_scheduler.warmup_steps = 2
    config.optimizer.betas = (0.9, 0.95)  # train_qwen3_5_debug.yaml:30 train.optimizer.betas
    # train_qwen3_5_debug.yaml:34 train.checkpoint.output_dir
    config.checkpoint.folder = "outputs/qwen3_5_debug"
    # no checkpoints for a smoke run
    config.checkpoint.interval = 0  # train_qwen3_5_debug.yaml:35 train.checkpoint.save_steps
    # train_qwen3_5_debug.yaml:36 train.checkpoint.save_hf_weights
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 1  # train_qwen3_5_debug.yaml:38 train.logging.log_steps
    config.debug.deterministic = True  # train_qwen3_5_debug.yaml:41 train.debug.deterministic
    config.debug.check_nan_inf = True  # train_qwen3_5_debug.yaml:42 train.debug.check_nan_inf
    return config
