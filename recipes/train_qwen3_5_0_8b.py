"""Recipe train_qwen3_5_0_8b, converted from examples/yaml/train_qwen3_5_0_8b.yaml
(sha256 39348e341571812c940f38786252471ab494fb049037f2bf27e79c54371f2c79).

The YAML's header comment:

    Qwen3.5-0.8B truncated to 4 layers, FSDP over 4 ranks, bf16 mixed precision.
    The legacy reference example (validated 1-card <-> FSDP4 loss parity there).
      torchrun --nproc_per_node 4 scripts/train_lm.py examples/yaml/train_qwen3_5_0_8b.yaml

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module recipes.train_qwen3_5_0_8b --config train_qwen3_5_0_8b

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_0_8b.yaml``. It starts from flavor_baseline: model 'qwen3_5' (its
default flavor) and sets, one line each in the order of ``HyperTrainer.Config``, the fields the
YAML changes, each commented with the legacy key and line it comes from and the YAML's own
comment on that key. Before writing, the converter executed this module and checked that
``trainer_config_to_legacy(train_qwen3_5_0_8b())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["train_qwen3_5_0_8b"]


def train_qwen3_5_0_8b() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 5)
    # model.config_overrides (line 6): flavor defaults to 0.8b
    config.model.config_overrides = {"num_hidden_layers": 4}
    config.dataloader.shuffle = False  # data.shuffle (line 11)
    config.optimizer.weight_decay = 0.0  # train.optimizer.weight_decay (line 30)
    config.lr_scheduler.warmup_steps = 2  # train.optimizer.lr_warmup_ratio (line 28)
    config.lr_scheduler.lr_min = 0.0  # train.optimizer.lr_min (line 26)
    config.loss.aggregation = "rank_average"  # train.optimizer.loss_aggregation (line 31)
    config.checkpoint.folder = "outputs/qwen3_5"  # train.checkpoint.output_dir (line 40)
    config.checkpoint.interval = 0  # train.checkpoint.save_steps (line 41)
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 42)
    config.metrics.log_freq = 1  # train.logging.log_steps (line 44)
    config.metrics.report_throughput = False  # train.logging.report_throughput (line 45)
    config.training.steps = 20  # train.max_steps (line 14)
    config.training.global_batch_size = 4  # train.global_batch_size (line 15)
    config.training.seq_len = 64  # data.max_seq_len (line 10)
    # train.mixed_precision.{enabled, param_dtype, reduce_dtype, output_dtype} (lines 33-36)
    config.training.mixed_precision_param = "bfloat16"
    # train.mixed_precision.{enabled, param_dtype, reduce_dtype, output_dtype} (lines 33-36)
    config.training.mixed_precision_output = "bfloat16"
    # train.optimizer.max_grad_norm (line 29): clipping effectively off
    config.training.max_norm = 1000000000.0
    config.parallelism.data_parallel_shard_degree = 4  # train.accelerator.dp_shard (line 21)
    # train.gradient_checkpointing.activation_checkpoint (line 38)
    config.activation_checkpoint.mode = "none"
    config.debug.seed = 1234  # train.seed (line 17)
    config.debug.deterministic = True  # train.debug.deterministic (line 47)
    return config
