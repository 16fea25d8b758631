"""Recipe pipeline, converted from pipeline.yaml
(sha256 038e75ceeb79bd9201c8dcd698210c728626f0747ea7a5e8ffd6b62e6b87d569).

The YAML's header comment:

    A pipeline-parallel run of the debug model: 2 ranks, two stages each, interleaved.
      torchrun --nproc_per_node 2 scripts/train_lm.py pipeline.yaml

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module pipeline --config pipeline

Written by ``python -m hyper_parallel.codegen --from-yaml pipeline.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(pipeline())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["pipeline"]


def pipeline() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 4)
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    config.training.steps = 8  # train.max_steps (line 6)
    config.training.local_batch_size = 2  # train.micro_batch_size (line 8)
    config.parallelism.pipeline_parallel_degree = 2  # train.accelerator.pp (line 10)
    # train.accelerator.{pp_vpp, pp_schedule} (lines 11-12)
    config.parallelism.pipeline_parallel_schedule = "Interleaved1F1B"
    # train.accelerator.pp_micro_batch_num (line 13): the step's 8 rows in 4 micro-batches
    config.parallelism.num_pp_microbatches = 4
    # train.accelerator.{pp_vpp, pp_schedule} (lines 11-12): rank r holds stages r and r + 2
    config.parallelism.pipeline_parallel_stages_per_rank = 2
    # train.accelerator.pp_layer_split (line 14)
    config.parallelism.pipeline_parallel_layer_split = [2, 2, 1, 1]
    return config
