"""Recipe data_streaming, converted from data_streaming.yaml
(sha256 b4121a49817363d2a0c96acf4cf7a3f019de485cc30ab52176ed9d1bd95574ab).

The YAML's header comment:

    The data section of the later snapshots' streaming example (examples/qwen3_5_0_8b_base/
    train_hf_streaming.yaml there): JSON lines of {\"text\": ...} read as a stream.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_streaming --config data_streaming

Written by ``python -m hyper_parallel.codegen --from-yaml data_streaming.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_streaming())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_streaming"]


def data_streaming() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 4)
    # data.type (line 6): text records: the first record has `text`, no `instruction`
    config.dataloader.dataset = "json_file"
    # data.train_path (line 7)
    config.dataloader.dataset_path = "examples/qwen3_5_0_8b_base/demo_data/train_demo.jsonl"
    # data.train_size (line 12): the global sample budget of an epoch
    config.dataloader.max_samples = 1024
    # data.streaming (line 11): a datasets IterableDataset, split over the data-parallel ranks
    config.dataloader.streaming = True
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 13
    config.training.steps = 128  # train.max_steps (line 17)
    config.training.global_batch_size = 4  # train.global_batch_size (line 18)
    config.training.seq_len = 64  # data.max_seq_len (line 10)
    return config
