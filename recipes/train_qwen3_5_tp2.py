"""Recipe train_qwen3_5_tp2, converted from examples/yaml/train_qwen3_5_tp2.yaml
(sha256 f65876cc9f9b4a44fdfc0cb2e7ba33424812ae3800e7a5c2b6cf80b7a78c0f92).

The YAML's header comment:

    Debug model, tensor parallel over 2 ranks (every layer type is sharded by head).
      torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_tp2.yaml

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.train_qwen3_5_tp2 --config train_qwen3_5_tp2

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_tp2.yaml``. It starts from flavor_baseline: model 'qwen3_5', flavor
'debugmodel' and sets, one line each in the order of ``HyperTrainer.Config``, the fields the
YAML changes, each commented with the legacy key and line it comes from and the YAML's own
comment on that key. Before writing, the converter executed this module and checked that
``trainer_config_to_legacy(train_qwen3_5_tp2())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["train_qwen3_5_tp2"]


def train_qwen3_5_tp2() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 4-6)
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.shuffle = False  # data.shuffle (line 10)
    config.dataloader.pin_memory = False  # data.pin_memory (line 11)
    config.optimizer.lr = 0.001  # train.optimizer.lr (line 22)
    config.lr_scheduler.warmup_steps = 2  # train.optimizer.lr_warmup_ratio (line 24)
    config.lr_scheduler.decay_style = "constant"  # train.optimizer.lr_decay_style (line 25)
    config.lr_scheduler.lr_min = 0.0001  # train.optimizer.lr_min (line 23)
    config.checkpoint.folder = "outputs/qwen3_5_tp2"  # train.checkpoint.output_dir (line 30)
    config.checkpoint.interval = 0  # train.checkpoint.save_steps (line 31)
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 32)
    config.metrics.log_freq = 1  # train.logging.log_steps (line 34)
    config.metrics.enable_memory_monitor = True  # train.memory_monitor.enabled (line 37)
    config.metrics.memory_log_freq = 5  # train.memory_monitor.log_steps (line 38)
    config.training.steps = 10  # train.max_steps (line 13)
    config.training.global_batch_size = 4  # train.global_batch_size (line 14)
    config.training.local_batch_size = 2  # train.micro_batch_size (line 15)
    config.training.seq_len = 128  # data.max_seq_len (line 9)
    config.training.max_norm = 0.0  # train.optimizer.max_grad_norm (line 26): clipping disabled
    # train.accelerator.dp_shard (line 20): inferred: world 2 / tp 2 = 1
    config.parallelism.data_parallel_shard_degree = -1
    config.parallelism.tensor_parallel_degree = 2  # train.accelerator.tp (line 19)
    # train.gradient_checkpointing.activation_checkpoint (line 28)
    config.activation_checkpoint.mode = "selective"
    config.comm.backend = "gloo"  # train.comm_backend (line 17)
    config.debug.seed = 1234  # train.seed (line 16)
    config.debug.deterministic = True  # train.debug.deterministic (line 40)
    return config
