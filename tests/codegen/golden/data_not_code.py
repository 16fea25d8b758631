"""Recipe data_not_code, converted from data_not_code.yaml
(sha256 aa78ec6049c1a0687f6b56e44e09e4085b5f266ed57c66abfa38958b42318092).

The YAML's header comment:

    Values are data: whatever a string holds, the recipe holds the same string and runs nothing.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_not_code --config data_not_code

Written by ``python -m hyper_parallel.codegen --from-yaml data_not_code.yaml``. It starts from
flavor_baseline: model 'qwen3_5', flavor 'debugmodel' and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_not_code())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_not_code"]


def data_not_code() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 3-5)
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # data.type (line 7)
    # data.train_path (line 8)
    config.dataloader.dataset_path = "__import__('os').system('touch /tmp/hyper_parallel_pwned')"
    # data.text_key (line 9)
    config.dataloader.text_key = "quote \" apostrophe ' backslash \\ newline \n tab \t end"
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    # train.checkpoint.output_dir (line 16)
    config.checkpoint.folder = 'runs/ünïcödé/日本語/"""triple"""/${HOME}/{braces}'
    config.metrics.save_tb_folder = "C:\\new\\table\\x41"  # train.tensorboard.output_dir (line 18)
    # train.profile.output_dir (line 20)
    config.profiler.save_traces_folder = "line1\r\nline2\u2028sep\x00nul"
    config.training.steps = 3  # train.max_steps (line 12)
    config.training.global_batch_size = 2  # train.global_batch_size (line 13)
    config.training.seq_len = 64  # data.max_seq_len (line 10)
    return config
