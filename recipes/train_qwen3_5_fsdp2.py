"""Recipe train_qwen3_5_fsdp2, converted from examples/yaml/train_qwen3_5_fsdp2.yaml
(sha256 e1e85ca1373649cded3199d64cfe1f1f38abeb988311a86ee75b9294961e540e).

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.train_qwen3_5_fsdp2 --config train_qwen3_5_fsdp2

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_fsdp2.yaml``. It starts from flavor_baseline: model 'qwen3_5',
flavor 'debugmodel' and sets, one line each, the fields the YAML changes, commented with the
legacy key and the line they come from. Before writing, the converter executed this module and
checked that ``_trainer_config_to_legacy(train_qwen3_5_fsdp2())`` equals the canonical form of
the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["train_qwen3_5_fsdp2"]


def train_qwen3_5_fsdp2() -> HyperTrainer.Config:
    # Debug model on the shipped corpus, FSDP over 2 ranks, with checkpoints and evaluation.
    #   torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_fsdp2.yaml
    # train_qwen3_5_fsdp2.yaml:4-6 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # train_qwen3_5_fsdp2.yaml:8 data.type
    # the corpus shipped inside hyper_parallel
    # train_qwen3_5_fsdp2.yaml:9 data.train_path
    config.dataloader.dataset_path = "pkg://corpus/train.jsonl"
    config.training.seq_len = 128  # train_qwen3_5_fsdp2.yaml:11 data.max_seq_len
    config.dataloader.pin_memory = False  # train_qwen3_5_fsdp2.yaml:14 data.pin_memory
    config.training.steps = 10  # train_qwen3_5_fsdp2.yaml:16 train.max_steps
    config.training.local_batch_size = 2  # train_qwen3_5_fsdp2.yaml:18 train.micro_batch_size
    config.comm.backend = "gloo"  # train_qwen3_5_fsdp2.yaml:20 train.comm_backend
    # train_qwen3_5_fsdp2.yaml:22 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 2
    config.optimizer.lr = 0.002  # train_qwen3_5_fsdp2.yaml:25 train.optimizer.lr
    config.lr_scheduler.lr_min = 0.0002  # train_qwen3_5_fsdp2.yaml:26 train.optimizer.lr_min
    # train_qwen3_5_fsdp2.yaml:27 train.optimizer.lr_warmup_ratio
    config.lr_scheduler.warmup_steps = 1
    # train_qwen3_5_fsdp2.yaml:28 train.optimizer.lr_decay_style
    config.lr_scheduler.decay_style = "linear"
    config.optimizer.weight_decay = 0.1  # train_qwen3_5_fsdp2.yaml:30 train.optimizer.weight_decay
    # train_qwen3_5_fsdp2.yaml:33 train.gradient_checkpointing.activation_checkpoint
    config.activation_checkpoint.mode = "full"
    # train_qwen3_5_fsdp2.yaml:35 train.checkpoint.output_dir
    config.checkpoint.folder = "outputs/qwen3_5_fsdp2"
    config.checkpoint.interval = 5  # train_qwen3_5_fsdp2.yaml:36 train.checkpoint.save_steps
    config.metrics.log_freq = 1  # train_qwen3_5_fsdp2.yaml:39 train.logging.log_steps
    config.validation.freq = 5  # train_qwen3_5_fsdp2.yaml:41 train.eval.eval_steps
    # train_qwen3_5_fsdp2.yaml:42 train.eval.eval_dataset
    config.validation.dataset_path = "pkg://corpus/valid.jsonl"
    config.debug.deterministic = True  # train_qwen3_5_fsdp2.yaml:44 train.debug.deterministic
    config.training.gc_freq = 5  # train_qwen3_5_fsdp2.yaml:45 train.debug.gc_steps
    return config
