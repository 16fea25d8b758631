"""Recipe train_qwen3_5_hsdp, converted from examples/yaml/train_qwen3_5_hsdp.yaml
(sha256 c96271d9259843e8f577f147168d9a3cc1e94cd90a575352e70aaddbb77a4b62).

The YAML's header comment:

    Debug model, HSDP: 2 replicas x FSDP over 2 (4 ranks).
      torchrun --nproc_per_node 4 scripts/train_lm.py examples/yaml/train_qwen3_5_hsdp.yaml

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module recipes.train_qwen3_5_hsdp --config train_qwen3_5_hsdp

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_hsdp.yaml``. It starts from flavor_baseline: model 'qwen3_5', flavor
'debugmodel' and sets, one line each in the order of ``HyperTrainer.Config``, the fields the
YAML changes, each commented with the legacy key and line it comes from and the YAML's own
comment on that key. Before writing, the converter executed this module and checked that
``trainer_config_to_legacy(train_qwen3_5_hsdp())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["train_qwen3_5_hsdp"]


def train_qwen3_5_hsdp() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 4-6)
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.pin_memory = False  # data.pin_memory (line 11)
    config.optimizer.lr = 0.001  # train.optimizer.lr (line 23)
    config.optimizer.betas = (0.9, 0.95)  # train.optimizer.betas (line 27)
    config.lr_scheduler.warmup_steps = 1  # train.optimizer.lr_warmup_ratio (line 25)
    config.lr_scheduler.lr_min = 0.0001  # train.optimizer.lr_min (line 24)
    config.checkpoint.folder = "outputs/qwen3_5_hsdp"  # train.checkpoint.output_dir (line 32)
    config.checkpoint.interval = 0  # train.checkpoint.save_steps (line 33)
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 34)
    config.metrics.log_freq = 2  # train.logging.log_steps (line 36)
    config.metrics.enable_tensorboard = True  # train.tensorboard.enabled (line 38)
    # train.tensorboard.output_dir (line 39)
    config.metrics.save_tb_folder = "outputs/qwen3_5_hsdp/tb"
    config.training.steps = 10  # train.max_steps (line 13)
    config.training.seq_len = 64  # data.max_seq_len (line 9)
    # train.accelerator.dp_replicate (line 19)
    config.parallelism.data_parallel_replicate_degree = 2
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 20)
    # train.accelerator.reshard_after_forward (line 21)
    config.parallelism.reshard_after_forward = False
    config.comm.backend = "gloo"  # train.comm_backend (line 17)
    config.debug.seed = 1234  # train.seed (line 16)
    config.debug.deterministic = True  # train.debug.deterministic (line 42)
    return config
