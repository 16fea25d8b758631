"""Recipe data_vl_dummy, converted from data_vl_dummy.yaml
(sha256 124dd9a6b6bdc10c3ed337110d6f5dd40e942099887d71a9cf227df3750d3031).

The YAML's header comment:

    Synthetic image-text batches (the upstream vl_dummy), for throughput runs without a corpus.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_vl_dummy --config data_vl_dummy

Written by ``python -m hyper_parallel.codegen --from-yaml data_vl_dummy.yaml``. It starts from
flavor_baseline: model 'qwen3_5', flavor '9b_vl' and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_vl_dummy())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_vl_dummy"]


def data_vl_dummy() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 3-5)
    config = flavor_baseline("qwen3_5", "9b_vl")
    config.dataloader.dataset = "vl_dummy"  # data.type (line 7)
    config.dataloader.vl_grid_t = 1  # data.vl_grid_t (line 8)
    config.dataloader.vl_grid_h = 32  # data.vl_grid_h (line 9): 32 x 32 patches: 256 image tokens
    config.dataloader.vl_grid_w = 32  # data.vl_grid_w (line 10)
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 2
    config.training.steps = 20  # train.max_steps (line 13)
    config.training.seq_len = 4096  # data.max_seq_len (line 11)
    return config
