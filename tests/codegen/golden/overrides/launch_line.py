"""Recipe base_run, converted from base_run.yaml
(sha256 8a38f44e7b5aa5bd68a0e30f53d9ff8e864b8366cae356d0e89d031dff2841e9),
with the command-line overrides --train.max_steps=30 --train.checkpoint.output_dir=outputs/long.

The YAML's header comment:

    The run the overrides change: the debug model, FSDP over 2 ranks.

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module launch_line --config base_run

Written by ``python -m hyper_parallel.codegen --from-yaml 'OMP_NUM_THREADS=1 torchrun
--standalone --nproc_per_node 4 scripts/train_lm.py base_run.yaml --train.max_steps=30
--train.checkpoint.output_dir=outputs/long'``. It starts from flavor_baseline: model 'qwen3_5',
flavor 'debugmodel' and sets, one line each in the order of ``HyperTrainer.Config``, the fields
the YAML and the command-line overrides change, each commented with the legacy key and line it
comes from (``command line: --a.b=c`` for an override) and the YAML's own comment on that key.
Before writing, the converter executed this module and checked that
``trainer_config_to_legacy(base_run())`` equals the canonical form of the YAML with the
overrides applied.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["base_run"]


def base_run() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 3-5)
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.optimizer.lr = 0.001  # train.optimizer.lr (line 17)
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 3
    # command line: --train.checkpoint.output_dir=outputs/long
    config.checkpoint.folder = "outputs/long"
    config.metrics.log_freq = 1  # train.logging.log_steps (line 19)
    config.training.steps = 30  # command line: --train.max_steps=30; the command line makes it 30
    config.training.global_batch_size = 4  # train.global_batch_size (line 11)
    config.training.local_batch_size = 2  # train.micro_batch_size (line 12)
    config.training.seq_len = 64  # data.max_seq_len (line 8)
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 15)
    config.comm.backend = "gloo"  # train.comm_backend (line 13)
    return config
