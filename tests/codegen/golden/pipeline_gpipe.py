"""Recipe pipeline_gpipe, converted from pipeline_gpipe.yaml
(sha256 63aa31afd601aa34f9a9d0fb028f7e40747d2ecb6121dc47aa1ba0763b381ab3).

The YAML's header comment:

    GPipe over 2 pipeline ranks and 2 FSDP ranks.

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module pipeline_gpipe --config pipeline_gpipe

Written by ``python -m hyper_parallel.codegen --from-yaml pipeline_gpipe.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(pipeline_gpipe())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["pipeline_gpipe"]


def pipeline_gpipe() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    config.training.local_batch_size = 2  # train.micro_batch_size (line 6)
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 8)
    config.parallelism.pipeline_parallel_degree = 2  # train.accelerator.pp (line 9)
    # train.accelerator.pp_schedule (line 10)
    config.parallelism.pipeline_parallel_schedule = "GPipe"
    config.parallelism.num_pp_microbatches = 2  # train.accelerator.pp_micro_batch_num (line 11)
    return config
