"""Recipe renames, converted from renames.yaml
(sha256 13c443e7756a0996f5343a2ef1b96227d2cbd3f15ec7a876d84f2f32382ae637).

The YAML's header comment:

    Plain renames: each legacy key lands on one new field, one line each.

Train it with

    torchrun --nproc_per_node 8 -m hyper_parallel.train --module renames --config renames

Written by ``python -m hyper_parallel.codegen --from-yaml renames.yaml``. It starts from
flavor_baseline: model 'qwen3_5', flavor 'debugmodel' and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(renames())`` equals the
canonical form of the YAML.

The YAML's comments on keys that no line sets:

* train.max_steps (line 17): same as the default: no line
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["renames"]


def renames() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 3-7)
    config = flavor_baseline("qwen3_5", "debugmodel")
    # model.weights_path (line 4): Hugging Face weights to start from
    config.model.weights_path = "checkpoints/qwen3_5_debug/hf"
    config.dataloader.dataset = "jsonl"  # data.type (line 9): a corpus on disk
    config.dataloader.dataset_path = "data/train.jsonl"  # data.train_path (line 10)
    config.dataloader.text_key = "body"  # data.text_key (line 11)
    config.dataloader.num_workers = 2  # data.num_workers (line 13)
    config.dataloader.shuffle = False  # data.shuffle (line 15)
    config.dataloader.prefetch_factor = 4  # data.prefetch_factor (line 14)
    config.optimizer.lr = 0.0002  # train.optimizer.lr (line 27)
    config.optimizer.betas = (0.9, 0.98)  # train.optimizer.betas (line 33)
    config.optimizer.eps = 1e-06  # train.optimizer.eps (line 32)
    config.optimizer.weight_decay = 0.05  # train.optimizer.weight_decay (line 30)
    config.optimizer.foreach = False  # train.optimizer.foreach (line 34)
    config.lr_scheduler.decay_style = "linear"  # train.optimizer.lr_decay_style (line 29)
    config.lr_scheduler.lr_min = 1e-06  # train.optimizer.lr_min (line 28)
    config.checkpoint.folder = "runs/renames"  # train.checkpoint.output_dir (line 36)
    config.checkpoint.interval = 50  # train.checkpoint.save_steps (line 37)
    config.checkpoint.export_hf = False  # train.checkpoint.save_hf_weights (line 38)
    config.metrics.log_freq = 5  # train.logging.log_steps (line 40)
    config.metrics.report_throughput = False  # train.logging.report_throughput (line 41)
    config.metrics.enable_tensorboard = True  # train.tensorboard.enabled (line 43)
    config.metrics.save_tb_folder = "runs/renames/tb"  # train.tensorboard.output_dir (line 44)
    config.metrics.tb_log_freq = 5  # train.tensorboard.log_steps (line 45)
    config.metrics.wandb_project = "renames"  # train.wandb.project (line 47)
    config.metrics.wandb_run_name = "run-1"  # train.wandb.run_name (line 48)
    config.metrics.wandb_log_freq = 5  # train.wandb.log_steps (line 49)
    config.metrics.enable_memory_monitor = True  # train.memory_monitor.enabled (line 51)
    config.metrics.memory_log_freq = 10  # train.memory_monitor.log_steps (line 52)
    config.profiler.enable_profiling = True  # train.profile.enabled (line 54)
    # train.profile.output_dir (line 55)
    config.profiler.save_traces_folder = "runs/renames/profile"
    config.profiler.wait = 2  # train.profile.wait_steps (line 56)
    config.profiler.active = 2  # train.profile.active_steps (line 58)
    config.training.global_batch_size = 16  # train.global_batch_size (line 18)
    config.training.local_batch_size = 2  # train.micro_batch_size (line 19)
    config.training.seq_len = 256  # data.max_seq_len (line 12)
    config.training.max_norm = 0.5  # train.optimizer.max_grad_norm (line 31)
    config.training.gc_freq = 10  # train.debug.gc_steps (line 65)
    config.training.freeze_modules = ["embed_tokens"]  # model.freeze_modules (line 5)
    config.parallelism.data_parallel_shard_degree = 4  # train.accelerator.dp_shard (line 23)
    config.parallelism.tensor_parallel_degree = 2  # train.accelerator.tp (line 24)
    # train.accelerator.reshard_after_forward (line 25)
    config.parallelism.reshard_after_forward = False
    config.comm.backend = "gloo"  # train.comm_backend (line 21)
    config.debug.seed = 7  # train.seed (line 20)
    config.debug.deterministic = True  # train.debug.deterministic (line 63)
    config.debug.check_nan_inf = True  # train.debug.check_nan_inf (line 64)
    config.validation.freq = 25  # train.eval.eval_steps (line 60)
    config.validation.dataset_path = "data/valid.jsonl"  # train.eval.eval_dataset (line 61)
    return config
