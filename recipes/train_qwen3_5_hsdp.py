"""Recipe train_qwen3_5_hsdp, converted from examples/yaml/train_qwen3_5_hsdp.yaml
(sha256 c96271d9259843e8f577f147168d9a3cc1e94cd90a575352e70aaddbb77a4b62).

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module recipes.train_qwen3_5_hsdp --config train_qwen3_5_hsdp

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_hsdp.yaml``. It starts from flavor_baseline: model 'qwen3_5', flavor
'debugmodel' and sets, one line each, the fields the YAML changes, commented with the legacy key
and the line they come from. Before writing, the converter executed this module and checked that
``_trainer_config_to_legacy(train_qwen3_5_hsdp())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["train_qwen3_5_hsdp"]


def train_qwen3_5_hsdp() -> HyperTrainer.Config:
    # Debug model, HSDP: 2 replicas x FSDP over 2 (4 ranks).
    #   torchrun --nproc_per_node 4 scripts/train_lm.py examples/yaml/train_qwen3_5_hsdp.yaml
    # train_qwen3_5_hsdp.yaml:4-6 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.training.seq_len = 64  # train_qwen3_5_hsdp.yaml:9 data.max_seq_len
    config.dataloader.pin_memory = False  # train_qwen3_5_hsdp.yaml:11 data.pin_memory
    config.training.steps = 10  # train_qwen3_5_hsdp.yaml:13 train.max_steps
    config.debug.seed = 1234  # train_qwen3_5_hsdp.yaml:16 train.seed
    config.comm.backend = "gloo"  # train_qwen3_5_hsdp.yaml:17 train.comm_backend
    # train_qwen3_5_hsdp.yaml:19 train.accelerator.dp_replicate
    config.parallelism.data_parallel_replicate_degree = 2
    # train_qwen3_5_hsdp.yaml:20 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 2
    # train_qwen3_5_hsdp.yaml:21 train.accelerator.reshard_after_forward
    config.parallelism.reshard_after_forward = False
    config.optimizer.lr = 0.001  # train_qwen3_5_hsdp.yaml:23 train.optimizer.lr
    config.lr_scheduler.lr_min = 0.0001  # train_qwen3_5_hsdp.yaml:24 train.optimizer.lr_min
    # train_qwen3_5_hsdp.yaml:25 train.optimizer.lr_warmup_ratio
    config.lr_scheduler.warmup_steps = 1
    config.optimizer.betas = (0.9, 0.95)  # train_qwen3_5_hsdp.yaml:27 train.optimizer.betas
    # train_qwen3_5_hsdp.yaml:32 train.checkpoint.output_dir
    config.checkpoint.folder = "outputs/qwen3_5_hsdp"
    config.checkpoint.interval = 0  # train_qwen3_5_hsdp.yaml:33 train.checkpoint.save_steps
    # train_qwen3_5_hsdp.yaml:34 train.checkpoint.save_hf_weights
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 2  # train_qwen3_5_hsdp.yaml:36 train.logging.log_steps
    config.metrics.enable_tensorboard = True  # train_qwen3_5_hsdp.yaml:38 train.tensorboard.enabled
    # train_qwen3_5_hsdp.yaml:39 train.tensorboard.output_dir
    config.metrics.save_tb_folder = "outputs/qwen3_5_hsdp/tb"
    config.debug.deterministic = True  # train_qwen3_5_hsdp.yaml:42 train.debug.deterministic
    return config
