"""Recipe train_qwen3_5_0_8b, converted from examples/yaml/train_qwen3_5_0_8b.yaml
(sha256 39348e341571812c940f38786252471ab494fb049037f2bf27e79c54371f2c79).

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module recipes.train_qwen3_5_0_8b --config train_qwen3_5_0_8b

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_0_8b.yaml``. It starts from flavor_baseline: model 'qwen3_5' (its
default flavor) and sets, one line each, the fields the YAML changes, commented with the legacy
key and the line they come from. Before writing, the converter executed this module and checked
that ``_trainer_config_to_legacy(train_qwen3_5_0_8b())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["train_qwen3_5_0_8b"]


def train_qwen3_5_0_8b() -> HyperTrainer.Config:
    # Qwen3.5-0.8B truncated to 4 layers, FSDP over 4 ranks, bf16 mixed precision.
    # The legacy reference example (validated 1-card <-> FSDP4 loss parity there).
    #   torchrun --nproc_per_node 4 scripts/train_lm.py examples/yaml/train_qwen3_5_0_8b.yaml
    config = flavor_baseline("qwen3_5")  # train_qwen3_5_0_8b.yaml:5 model.name
    # flavor defaults to 0.8b
    # train_qwen3_5_0_8b.yaml:6 model.config_overrides
    config.model.config_overrides = {"num_hidden_layers": 4}
    config.training.seq_len = 64  # train_qwen3_5_0_8b.yaml:10 data.max_seq_len
    config.dataloader.shuffle = False  # train_qwen3_5_0_8b.yaml:11 data.shuffle
    config.training.steps = 20  # train_qwen3_5_0_8b.yaml:14 train.max_steps
    config.training.global_batch_size = 4  # train_qwen3_5_0_8b.yaml:15 train.global_batch_size
    config.debug.seed = 1234  # train_qwen3_5_0_8b.yaml:17 train.seed
    # train_qwen3_5_0_8b.yaml:21 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 4
    config.lr_scheduler.lr_min = 0.0  # train_qwen3_5_0_8b.yaml:26 train.optimizer.lr_min
    # train_qwen3_5_0_8b.yaml:28 train.optimizer.lr_warmup_ratio
    config.lr_scheduler.warmup_steps = 2
    # clipping effectively off
    # train_qwen3_5_0_8b.yaml:29 train.optimizer.max_grad_norm
    config.training.max_norm = 1000000000.0
    config.optimizer.weight_decay = 0.0  # train_qwen3_5_0_8b.yaml:30 train.optimizer.weight_decay
    # train_qwen3_5_0_8b.yaml:31 train.optimizer.loss_aggregation
    config.loss.aggregation = "rank_average"
    # train_qwen3_5_0_8b.yaml:33-36 train.mixed_precision.{enabled, param_dtype, reduce_dtype, output_dtype}
    config.training.mixed_precision_output = "bfloat16"
    # train_qwen3_5_0_8b.yaml:33-36 train.mixed_precision.{enabled, param_dtype, reduce_dtype, output_dtype}
    config.training.mixed_precision_param = "bfloat16"
    # train_qwen3_5_0_8b.yaml:38 train.gradient_checkpointing.activation_checkpoint
    config.activation_checkpoint.mode = "none"
    # train_qwen3_5_0_8b.yaml:40 train.checkpoint.output_dir
    config.checkpoint.folder = "outputs/qwen3_5"
    config.checkpoint.interval = 0  # train_qwen3_5_0_8b.yaml:41 train.checkpoint.save_steps
    # train_qwen3_5_0_8b.yaml:42 train.checkpoint.save_hf_weights
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 1  # train_qwen3_5_0_8b.yaml:44 train.logging.log_steps
    # train_qwen3_5_0_8b.yaml:45 train.logging.report_throughput
    config.metrics.report_throughput = False
    config.debug.deterministic = True  # train_qwen3_5_0_8b.yaml:47 train.debug.deterministic
    return config
