"""Recipe transforms, converted from transforms.yaml
(sha256 242be67ec2cc931ab6ce518624e8809929e66af7959d6c044945771dcc12590f).

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module transforms --config transforms

Written by ``python -m hyper_parallel.codegen --from-yaml transforms.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each, the fields the
YAML changes, commented with the legacy key and the line they come from. Before writing, the
converter executed this module and checked that ``_trainer_config_to_legacy(transforms())``
equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["transforms"]


def transforms() -> HyperTrainer.Config:
    # Transform rows: one legacy key to another shape, several keys to one field, one key to two.
    config = flavor_baseline("qwen3_5")  # transforms.yaml:3 model.name
    # empty means unset
    config.tokenizer.path = "assets/tokenizer.json"  # transforms.yaml:5 model.tokenizer_path
    config.training.seq_len = 64  # transforms.yaml:8 data.max_seq_len
    config.training.steps = 30  # transforms.yaml:10 train.max_steps
    config.training.global_batch_size = 4  # transforms.yaml:11 train.global_batch_size
    # the legacy alias of dp_shard
    config.parallelism.data_parallel_shard_degree = 2  # transforms.yaml:13 train.accelerator.dp
    # an alias: normalised to bfloat16
    # transforms.yaml:15-17 train.mixed_precision.{enabled, param_dtype, reduce_dtype}
    config.training.mixed_precision_param = "bfloat16"
    # transforms.yaml:19 train.gradient_checkpointing.activation_checkpoint
    config.activation_checkpoint.mode = "selective"
    # a transform: torch class name Adam
    config.optimizer.name = "Adam"  # transforms.yaml:21 train.optimizer.type
    # ceil(30 x 0.07) = 3 warmup steps
    config.lr_scheduler.warmup_steps = 3  # transforms.yaml:22 train.optimizer.lr_warmup_ratio
    # one key, two new fields
    config.loss.aggregation = "rank_average"  # transforms.yaml:23 train.optimizer.loss_aggregation
    config.checkpoint.folder = "runs/transforms"  # transforms.yaml:25 train.checkpoint.output_dir
    # transforms.yaml:26 train.checkpoint.load_path
    config.checkpoint.load_path = "runs/previous/step_10"
    config.checkpoint.async_mode = "async"  # transforms.yaml:27 train.checkpoint.save_async
    return config
