"""Recipe transforms, converted from transforms.yaml
(sha256 f064b28dd9d734779241cab1d095d669b769dfba8550699289c8b0e28da2adb3).

The YAML's header comment:

    Transform rows: one legacy key to another shape, several keys to one field, one key to two.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module transforms --config transforms

Written by ``python -m hyper_parallel.codegen --from-yaml transforms.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(transforms())`` equals the
canonical form of the YAML.

The YAML's comments on keys that no line sets:

* model.weights_path (line 4): empty means unset
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["transforms"]


def transforms() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    config.tokenizer.path = "assets/tokenizer.json"  # model.tokenizer_path (line 5)
    # train.optimizer.type (line 21): a transform: torch class name Adam
    config.optimizer.name = "Adam"
    # train.optimizer.lr_warmup_ratio (line 22): ceil(30 x 0.07) = 3 warmup steps
    config.lr_scheduler.warmup_steps = 3
    # train.optimizer.loss_aggregation (line 23): one key, two new fields
    config.loss.aggregation = "rank_average"
    config.checkpoint.folder = "runs/transforms"  # train.checkpoint.output_dir (line 25)
    config.checkpoint.load_path = "runs/previous/step_10"  # train.checkpoint.load_path (line 26)
    config.checkpoint.async_mode = "async"  # train.checkpoint.save_async (line 27)
    # train.logging.report_to (line 29): another spelling of train.wandb.enabled: true
    config.metrics.enable_wandb = True
    config.training.steps = 30  # train.max_steps (line 10)
    config.training.global_batch_size = 4  # train.global_batch_size (line 11)
    config.training.seq_len = 64  # data.max_seq_len (line 8)
    # train.mixed_precision.{enabled, param_dtype, reduce_dtype} (lines 15-17): an alias: normalised to bfloat16
    config.training.mixed_precision_param = "bfloat16"
    # train.accelerator.dp (line 13): the legacy alias of dp_shard
    config.parallelism.data_parallel_shard_degree = 2
    # train.gradient_checkpointing.activation_checkpoint (line 19)
    config.activation_checkpoint.mode = "selective"
    return config
