"""Recipe base_run, converted from base_run.yaml
(sha256 8a38f44e7b5aa5bd68a0e30f53d9ff8e864b8366cae356d0e89d031dff2841e9),
with the command-line overrides --train.max_steps=30 --data.max_seq_len 32
--model.config_overrides.num_hidden_layers=2 --train.optimizer.weight_decay=0.05.

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module with_overrides --config base_run

Written by ``python -m hyper_parallel.codegen --from-yaml base_run.yaml -- --train.max_steps=30
--data.max_seq_len 32 --model.config_overrides.num_hidden_layers=2
--train.optimizer.weight_decay=0.05``. It starts from flavor_baseline: model 'qwen3_5', flavor
'debugmodel' and sets, one line each, the fields the YAML and the command-line overrides change,
commented with the legacy key and the line they come from (``command line: --a.b=c`` for an
override). Before writing, the converter executed this module and checked that
``_trainer_config_to_legacy(base_run())`` equals the canonical form of the YAML with the
overrides applied.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["base_run"]


def base_run() -> HyperTrainer.Config:
    # The run the overrides change: the debug model, FSDP over 2 ranks.
    # base_run.yaml:3-5 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.training.seq_len = 32  # command line: --data.max_seq_len 32
    # the command line makes it 30
    config.training.steps = 30  # command line: --train.max_steps=30
    config.training.global_batch_size = 4  # base_run.yaml:11 train.global_batch_size
    config.training.local_batch_size = 2  # base_run.yaml:12 train.micro_batch_size
    config.comm.backend = "gloo"  # base_run.yaml:13 train.comm_backend
    config.parallelism.data_parallel_shard_degree = 2  # base_run.yaml:15 train.accelerator.dp_shard
    config.optimizer.lr = 0.001  # base_run.yaml:17 train.optimizer.lr
    config.metrics.log_freq = 1  # base_run.yaml:19 train.logging.log_steps
    # command line: --model.config_overrides.num_hidden_layers=2
    config.model.config_overrides["num_hidden_layers"] = 2
    config.optimizer.weight_decay = 0.05  # command line: --train.optimizer.weight_decay=0.05
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 3
    return config
