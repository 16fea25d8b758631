"""Recipe moe, converted from moe.yaml
(sha256 6daf1d76479affa5ca17a82987539371199eddf5bfcea20ed13bed6570ac5ebb).

The YAML's header comment:

    A Qwen3.5 mixture-of-experts run: the debug MoE model with expert parallelism over 2 ranks
    (its own mesh axis: the two ranks load the same batch and split its rows) and the expert
    bias balancing the load.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module moe --config moe

Written by ``python -m hyper_parallel.codegen --from-yaml moe.yaml``. It starts from
flavor_baseline: model 'qwen3_5_moe', flavor 'debugmodel' and sets, one line each in the order
of ``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(moe())`` equals the canonical
form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["moe"]


def moe() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 5-6)
    config = flavor_baseline("qwen3_5_moe", "debugmodel")
    # model.config_overrides.experts_implementation (line 6)
    config.model.config_overrides["experts_implementation"] = "loop"
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 2
    config.checkpoint.folder = "outputs/moe"  # train.checkpoint.output_dir (line 20)
    config.training.steps = 20  # train.max_steps (line 11)
    config.training.local_batch_size = 4  # train.micro_batch_size (line 12)
    config.training.seq_len = 128  # data.max_seq_len (line 9)
    config.parallelism.expert_parallel_degree = 2  # train.accelerator.ep (line 15)
    # train.moe_monitor.{enabled, lr} (lines 17-18): auxiliary-loss-free balancing
    config.moe.load_balance_coeff = 0.002
    return config
