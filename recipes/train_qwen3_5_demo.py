"""Recipe train_qwen3_5_demo, converted from examples/yaml/train_qwen3_5_demo.yaml
(sha256 2d909fc8a8ec8eb5a9c6beb2de595a91d227205e612dc0bc64dac688960fc4eb).

The YAML's header comment:

    The demo: the debug model on the shipped corpus, FSDP over 2 CPU ranks (`make demo`).
      torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_demo.yaml

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.train_qwen3_5_demo --config train_qwen3_5_demo

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_demo.yaml``. It starts from flavor_baseline: model 'qwen3_5', flavor
'debugmodel' and sets, one line each in the order of ``HyperTrainer.Config``, the fields the
YAML changes, each commented with the legacy key and line it comes from and the YAML's own
comment on that key. Before writing, the converter executed this module and checked that
``trainer_config_to_legacy(train_qwen3_5_demo())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["train_qwen3_5_demo"]


def train_qwen3_5_demo() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 4-6)
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # data.type (line 8)
    config.dataloader.dataset_path = "pkg://corpus/train.jsonl"  # data.train_path (line 9)
    config.dataloader.pin_memory = False  # data.pin_memory (line 12)
    config.optimizer.lr = 0.003  # train.optimizer.lr (line 22)
    config.optimizer.weight_decay = 0.1  # train.optimizer.weight_decay (line 26)
    config.lr_scheduler.warmup_steps = 2  # train.optimizer.lr_warmup_ratio (line 24)
    config.lr_scheduler.lr_min = 0.0003  # train.optimizer.lr_min (line 23)
    config.checkpoint.folder = "outputs/demo"  # train.checkpoint.output_dir (line 29)
    config.checkpoint.interval = 10  # train.checkpoint.save_steps (line 30)
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 31)
    config.metrics.log_freq = 1  # train.logging.log_steps (line 33)
    config.training.steps = 20  # train.max_steps (line 14)
    config.training.local_batch_size = 4  # train.micro_batch_size (line 16)
    config.training.seq_len = 128  # data.max_seq_len (line 10)
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 20)
    config.comm.backend = "gloo"  # train.comm_backend (line 18)
    config.debug.deterministic = True  # train.debug.deterministic (line 35)
    return config
