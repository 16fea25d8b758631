"""Recipe data_not_code, converted from data_not_code.yaml
(sha256 aa78ec6049c1a0687f6b56e44e09e4085b5f266ed57c66abfa38958b42318092).

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_not_code --config data_not_code

Written by ``python -m hyper_parallel.codegen --from-yaml data_not_code.yaml``. It starts from
flavor_baseline: model 'qwen3_5', flavor 'debugmodel' and sets, one line each, the fields the
YAML changes, commented with the legacy key and the line they come from. Before writing, the
converter executed this module and checked that ``_trainer_config_to_legacy(data_not_code())``
equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["data_not_code"]


def data_not_code() -> HyperTrainer.Config:
    # Values are data: whatever a string holds, the recipe holds the same string and runs nothing.
    # data_not_code.yaml:3-5 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # data_not_code.yaml:7 data.type
    # data_not_code.yaml:8 data.train_path
    config.dataloader.dataset_path = "__import__('os').system('touch /tmp/hyper_parallel_pwned')"
    # data_not_code.yaml:9 data.text_key
    config.dataloader.text_key = "quote \" apostrophe ' backslash \\ newline \n tab \t end"
    config.training.seq_len = 64  # data_not_code.yaml:10 data.max_seq_len
    config.training.steps = 3  # data_not_code.yaml:12 train.max_steps
    config.training.global_batch_size = 2  # data_not_code.yaml:13 train.global_batch_size
    # data_not_code.yaml:16 train.checkpoint.output_dir
    config.checkpoint.folder = 'runs/ünïcödé/日本語/"""triple"""/${HOME}/{braces}'
    # data_not_code.yaml:18 train.tensorboard.output_dir
    config.metrics.save_tb_folder = "C:\\new\\table\\x41"
    # data_not_code.yaml:20 train.profile.output_dir
    config.profiler.save_traces_folder = "line1\r\nline2\u2028sep\x00nul"
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    return config
