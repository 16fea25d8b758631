"""Recipe train_qwen3_5_fsdp2, converted from examples/yaml/train_qwen3_5_fsdp2.yaml
(sha256 e1e85ca1373649cded3199d64cfe1f1f38abeb988311a86ee75b9294961e540e).

The YAML's header comment:

    Debug model on the shipped corpus, FSDP over 2 ranks, with checkpoints and evaluation.
      torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_fsdp2.yaml

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.train_qwen3_5_fsdp2 --config train_qwen3_5_fsdp2

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_fsdp2.yaml``. It starts from flavor_baseline: model 'qwen3_5',
flavor 'debugmodel' and sets, one line each in the order of ``HyperTrainer.Config``, the fields
the YAML changes, each commented with the legacy key and line it comes from and the YAML's own
comment on that key. Before writing, the converter executed this module and checked that
``trainer_config_to_legacy(train_qwen3_5_fsdp2())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["train_qwen3_5_fsdp2"]


def train_qwen3_5_fsdp2() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 4-6)
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # data.type (line 8)
    # data.train_path (line 9): the corpus shipped inside hyper_parallel
    config.dataloader.dataset_path = "pkg://corpus/train.jsonl"
    config.dataloader.pin_memory = False  # data.pin_memory (line 14)
    config.optimizer.lr = 0.002  # train.optimizer.lr (line 25)
    config.optimizer.weight_decay = 0.1  # train.optimizer.weight_decay (line 30)
    config.lr_scheduler.warmup_steps = 1  # train.optimizer.lr_warmup_ratio (line 27)
    config.lr_scheduler.decay_style = "linear"  # train.optimizer.lr_decay_style (line 28)
    config.lr_scheduler.lr_min = 0.0002  # train.optimizer.lr_min (line 26)
    config.checkpoint.folder = "outputs/qwen3_5_fsdp2"  # train.checkpoint.output_dir (line 35)
    config.checkpoint.interval = 5  # train.checkpoint.save_steps (line 36)
    config.metrics.log_freq = 1  # train.logging.log_steps (line 39)
    config.training.steps = 10  # train.max_steps (line 16)
    config.training.local_batch_size = 2  # train.micro_batch_size (line 18)
    config.training.seq_len = 128  # data.max_seq_len (line 11)
    config.training.gc_freq = 5  # train.debug.gc_steps (line 45)
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 22)
    # train.gradient_checkpointing.activation_checkpoint (line 33)
    config.activation_checkpoint.mode = "full"
    config.comm.backend = "gloo"  # train.comm_backend (line 20)
    config.debug.deterministic = True  # train.debug.deterministic (line 44)
    config.validation.freq = 5  # train.eval.eval_steps (line 41)
    config.validation.dataset_path = "pkg://corpus/valid.jsonl"  # train.eval.eval_dataset (line 42)
    return config
