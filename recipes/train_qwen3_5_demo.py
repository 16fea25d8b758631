"""Recipe train_qwen3_5_demo, converted from examples/yaml/train_qwen3_5_demo.yaml
(sha256 2d909fc8a8ec8eb5a9c6beb2de595a91d227205e612dc0bc64dac688960fc4eb).

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.train_qwen3_5_demo --config train_qwen3_5_demo

Written by ``python -m hyper_parallel.codegen --from-yaml
examples/yaml/train_qwen3_5_demo.yaml``. It starts from flavor_baseline: model 'qwen3_5', flavor
'debugmodel' and sets, one line each, the fields the YAML changes, commented with the legacy key
and the line they come from. Before writing, the converter executed this module and checked that
``_trainer_config_to_legacy(train_qwen3_5_demo())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["train_qwen3_5_demo"]


def train_qwen3_5_demo() -> HyperTrainer.Config:
    # The demo: the debug model on the shipped corpus, FSDP over 2 CPU ranks (`make demo`).
    #   torchrun --nproc_per_node 2 scripts/train_lm.py examples/yaml/train_qwen3_5_demo.yaml
    # train_qwen3_5_demo.yaml:4-6 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # train_qwen3_5_demo.yaml:8 data.type
    # train_qwen3_5_demo.yaml:9 data.train_path
    config.dataloader.dataset_path = "pkg://corpus/train.jsonl"
    config.training.seq_len = 128  # train_qwen3_5_demo.yaml:10 data.max_seq_len
    config.dataloader.pin_memory = False  # train_qwen3_5_demo.yaml:12 data.pin_memory
    config.training.steps = 20  # train_qwen3_5_demo.yaml:14 train.max_steps
    config.training.local_batch_size = 4  # train_qwen3_5_demo.yaml:16 train.micro_batch_size
    config.comm.backend = "gloo"  # train_qwen3_5_demo.yaml:18 train.comm_backend
    # train_qwen3_5_demo.yaml:20 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 2
    config.optimizer.lr = 0.003  # train_qwen3_5_demo.yaml:22 train.optimizer.lr
    config.lr_scheduler.lr_min = 0.0003  # train_qwen3_5_demo.yaml:23 train.optimizer.lr_min
    # train_qwen3_5_demo.yaml:24 train.optimizer.lr_warmup_ratio
    config.lr_scheduler.warmup_steps = 2
    config.optimizer.weight_decay = 0.1  # train_qwen3_5_demo.yaml:26 train.optimizer.weight_decay
    # train_qwen3_5_demo.yaml:29 train.checkpoint.output_dir
    config.checkpoint.folder = "outputs/demo"
    config.checkpoint.interval = 10  # train_qwen3_5_demo.yaml:30 train.checkpoint.save_steps
    # train_qwen3_5_demo.yaml:31 train.checkpoint.save_hf_weights
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 1  # train_qwen3_5_demo.yaml:33 train.logging.log_steps
    config.debug.deterministic = True  # train_qwen3_5_demo.yaml:35 train.debug.deterministic
    return config
