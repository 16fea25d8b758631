"""Recipe data_hf_datasets, converted from data_hf_datasets.yaml
(sha256 f726bb1e7af28f7ec8362704e9559ceda2053bfdca3b1912cc9a6a11c0f0b263).

Train it with

    torchrun --nproc_per_node 4 -m hyper_parallel.train --module data_hf_datasets --config data_hf_datasets

Written by ``python -m hyper_parallel.codegen --from-yaml data_hf_datasets.yaml``. It starts
from flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each, the fields
the YAML changes, commented with the legacy key and the line they come from. Before writing, the
converter executed this module and checked that
``_trainer_config_to_legacy(data_hf_datasets())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["data_hf_datasets"]


def data_hf_datasets() -> HyperTrainer.Config:
    # A local Hugging Face dataset folder with configurations (data.type hf_datasets).
    config = flavor_baseline("qwen3_5")  # data_hf_datasets.yaml:3 model.name
    config.dataloader.dataset = "hf_datasets"  # data_hf_datasets.yaml:5 data.type
    config.dataloader.dataset_path = "/data/wiki_local"  # data_hf_datasets.yaml:6 data.train_path
    # the configuration of the dataset folder
    config.dataloader.dataset_subset = "en"  # data_hf_datasets.yaml:7 data.subset
    config.dataloader.text_key = "content"  # data_hf_datasets.yaml:8 data.text_key
    config.training.seq_len = 1024  # data_hf_datasets.yaml:9 data.max_seq_len
    config.dataloader.num_workers = 2  # data_hf_datasets.yaml:10 data.num_workers
    config.training.steps = 200  # data_hf_datasets.yaml:12 train.max_steps
    # data_hf_datasets.yaml:14 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 4
    # FSDP2's CPUOffloadPolicy
    # data_hf_datasets.yaml:15 train.accelerator.cpu_offload
    config.training.enable_cpu_offload = True
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 20
    return config
