"""Recipe train_qwen3_5_tp2, converted from examples/yaml/train_qwen3_5_tp2.yaml
(sha256 f65876cc9f9b4a44fdfc0cb2e7ba33424812ae3800e7a5c2b6cf80b7a78c0f92).

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.train_qwen3_5_tp2 --config train_qwen3_5_tp2

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_tp2.yaml``. It starts from flavor_baseline: model 'qwen3_5', flavor
'debugmodel' and sets, one line each, the fields the YAML changes, commented with the legacy key
and the line they come from. Before writing, the converter executed this module and checked that
``_trainer_config_to_legacy(train_qwen3_5_tp2())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["train_qwen3_5_tp2"]


def train_qwen3_5_tp2() -> HyperTrainer.Config:
    # Debug model, tensor parallel over 2 ranks (every layer type is sharded by head).
    #   torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_tp2.yaml
    # train_qwen3_5_tp2.yaml:4-6 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.training.seq_len = 128  # train_qwen3_5_tp2.yaml:9 data.max_seq_len
    config.dataloader.shuffle = False  # train_qwen3_5_tp2.yaml:10 data.shuffle
    config.dataloader.pin_memory = False  # train_qwen3_5_tp2.yaml:11 data.pin_memory
    config.training.steps = 10  # train_qwen3_5_tp2.yaml:13 train.max_steps
    config.training.global_batch_size = 4  # train_qwen3_5_tp2.yaml:14 train.global_batch_size
    config.training.local_batch_size = 2  # train_qwen3_5_tp2.yaml:15 train.micro_batch_size
    config.debug.seed = 1234  # train_qwen3_5_tp2.yaml:16 train.seed
    config.comm.backend = "gloo"  # train_qwen3_5_tp2.yaml:17 train.comm_backend
    config.parallelism.tensor_parallel_degree = 2  # train_qwen3_5_tp2.yaml:19 train.accelerator.tp
    # inferred: world 2 / tp 2 = 1
    # train_qwen3_5_tp2.yaml:20 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = -1
    config.optimizer.lr = 0.001  # train_qwen3_5_tp2.yaml:22 train.optimizer.lr
    config.lr_scheduler.lr_min = 0.0001  # train_qwen3_5_tp2.yaml:23 train.optimizer.lr_min
    # train_qwen3_5_tp2.yaml:24 train.optimizer.lr_warmup_ratio
    config.lr_scheduler.warmup_steps = 2
    # train_qwen3_5_tp2.yaml:25 train.optimizer.lr_decay_style
    config.lr_scheduler.decay_style = "constant"
    # clipping disabled
    config.training.max_norm = 0.0  # train_qwen3_5_tp2.yaml:26 train.optimizer.max_grad_norm
    # train_qwen3_5_tp2.yaml:28 train.gradient_checkpointing.activation_checkpoint
    config.activation_checkpoint.mode = "selective"
    # train_qwen3_5_tp2.yaml:30 train.checkpoint.output_dir
    config.checkpoint.folder = "outputs/qwen3_5_tp2"
    config.checkpoint.interval = 0  # train_qwen3_5_tp2.yaml:31 train.checkpoint.save_steps
    # train_qwen3_5_tp2.yaml:32 train.checkpoint.save_hf_weights
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 1  # train_qwen3_5_tp2.yaml:34 train.logging.log_steps
    # train_qwen3_5_tp2.yaml:37 train.memory_monitor.enabled
    config.metrics.enable_memory_monitor = True
    config.metrics.memory_log_freq = 5  # train_qwen3_5_tp2.yaml:38 train.memory_monitor.log_steps
    config.debug.deterministic = True  # train_qwen3_5_tp2.yaml:40 train.debug.deterministic
    return config
