"""Recipe data_preset_pt, converted from data_preset_pt.yaml
(sha256 0fbc7dd2a5458e6fb154d56eecfb772cceb72eaf20a5d78172b55eefe6e35454).

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module data_preset_pt --config data_preset_pt

Written by ``python -m hyper_parallel.codegen --from-yaml data_preset_pt.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each, the fields the
YAML changes, commented with the legacy key and the line they come from. Before writing, the
converter executed this module and checked that ``_trainer_config_to_legacy(data_preset_pt())``
equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["data_preset_pt"]


def data_preset_pt() -> HyperTrainer.Config:
    # Alignment regression: replay pre-tokenized batches (data.type preset_pt), never shuffled.
    config = flavor_baseline("qwen3_5")  # data_preset_pt.yaml:3 model.name
    config.dataloader.dataset = "preset_pt"  # data_preset_pt.yaml:5 data.type
    # data_preset_pt.yaml:6 data.train_path
    config.dataloader.dataset_path = "/data/align/batches.pt"
    # the legacy trainer never shuffled a replay: normalised to false
    config.dataloader.shuffle = False  # data_preset_pt.yaml:8 data.shuffle
    config.training.steps = 20  # data_preset_pt.yaml:10 train.max_steps
    config.training.global_batch_size = 4  # data_preset_pt.yaml:11 train.global_batch_size
    config.debug.seed = 1234  # data_preset_pt.yaml:12 train.seed
    # data_preset_pt.yaml:14 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 4
    config.training.max_norm = 1000000000.0  # data_preset_pt.yaml:18 train.optimizer.max_grad_norm
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 2
    return config
