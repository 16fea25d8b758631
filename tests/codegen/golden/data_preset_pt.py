"""Recipe data_preset_pt, converted from data_preset_pt.yaml
(sha256 0fbc7dd2a5458e6fb154d56eecfb772cceb72eaf20a5d78172b55eefe6e35454).

The YAML's header comment:

    Alignment regression: replay pre-tokenized batches (data.type preset_pt), never shuffled.

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module data_preset_pt --config data_preset_pt

Written by ``python -m hyper_parallel.codegen --from-yaml data_preset_pt.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_preset_pt())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_preset_pt"]


def data_preset_pt() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    config.dataloader.dataset = "preset_pt"  # data.type (line 5)
    config.dataloader.dataset_path = "/data/align/batches.pt"  # data.train_path (line 6)
    # data.shuffle (line 8): the legacy trainer never shuffled a replay: normalised to false
    config.dataloader.shuffle = False
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 2
    config.training.steps = 20  # train.max_steps (line 10)
    config.training.global_batch_size = 4  # train.global_batch_size (line 11)
    config.training.max_norm = 1000000000.0  # train.optimizer.max_grad_norm (line 18)
    config.parallelism.data_parallel_shard_degree = 4  # train.accelerator.dp_shard (line 14)
    config.debug.seed = 1234  # train.seed (line 12)
    return config
