"""Recipe data_hf_datasets, converted from data_hf_datasets.yaml
(sha256 f726bb1e7af28f7ec8362704e9559ceda2053bfdca3b1912cc9a6a11c0f0b263).

The YAML's header comment:

    A local Hugging Face dataset folder with configurations (data.type hf_datasets).

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module data_hf_datasets --config data_hf_datasets

Written by ``python -m hyper_parallel.codegen --from-yaml data_hf_datasets.yaml``. It starts
from flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order
of ``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_hf_datasets())`` equals
the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_hf_datasets"]


def data_hf_datasets() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    config.dataloader.dataset = "hf_datasets"  # data.type (line 5)
    config.dataloader.dataset_path = "/data/wiki_local"  # data.train_path (line 6)
    # data.subset (line 7): the configuration of the dataset folder
    config.dataloader.dataset_subset = "en"
    config.dataloader.text_key = "content"  # data.text_key (line 8)
    config.dataloader.num_workers = 2  # data.num_workers (line 10)
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 20
    config.training.steps = 200  # train.max_steps (line 12)
    config.training.seq_len = 1024  # data.max_seq_len (line 9)
    # train.accelerator.cpu_offload (line 15): FSDP2's CPUOffloadPolicy
    config.training.enable_cpu_offload = True
    config.parallelism.data_parallel_shard_degree = 4  # train.accelerator.dp_shard (line 14)
    return config
