"""Recipe renames, converted from renames.yaml
(sha256 9125933bf53b4e269d85cd90157ea5e3d7b5cc9666c197a6842fc6deb02f4a2c).

Train it with

    torchrun --nproc_per_node 8 -m hyper_parallel.train --module renames --config renames

Written by ``python -m hyper_parallel.codegen --from-yaml renames.yaml``. It starts from
flavor_baseline: model 'qwen3_5', flavor 'debugmodel' and sets, one line each, the fields the
YAML changes, commented with the legacy key and the line they come from. Before writing, the
converter executed this module and checked that ``_trainer_config_to_legacy(renames())`` equals
the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["renames"]


def renames() -> HyperTrainer.Config:
    # Plain renames: each legacy key lands on one new field, one line each.
    # renames.yaml:3-7 model.name, model.config_overrides.flavor
    config = flavor_baseline("qwen3_5", "debugmodel")
    # Hugging Face weights to start from
    config.model.weights_path = "checkpoints/qwen3_5_debug/hf"  # renames.yaml:4 model.weights_path
    config.training.freeze_modules = ["embed_tokens"]  # renames.yaml:5 model.freeze_modules
    # a corpus on disk
    config.dataloader.dataset = "jsonl"  # renames.yaml:9 data.type
    config.dataloader.dataset_path = "data/train.jsonl"  # renames.yaml:10 data.train_path
    config.dataloader.text_key = "body"  # renames.yaml:11 data.text_key
    config.training.seq_len = 256  # renames.yaml:12 data.max_seq_len
    config.dataloader.num_workers = 2  # renames.yaml:13 data.num_workers
    config.dataloader.prefetch_factor = 4  # renames.yaml:14 data.prefetch_factor
    config.dataloader.shuffle = False  # renames.yaml:15 data.shuffle
    # same as the default: no line
    config.training.global_batch_size = 16  # renames.yaml:18 train.global_batch_size
    config.training.local_batch_size = 2  # renames.yaml:19 train.micro_batch_size
    config.debug.seed = 7  # renames.yaml:20 train.seed
    config.comm.backend = "gloo"  # renames.yaml:21 train.comm_backend
    config.parallelism.data_parallel_shard_degree = 4  # renames.yaml:23 train.accelerator.dp_shard
    config.parallelism.tensor_parallel_degree = 2  # renames.yaml:24 train.accelerator.tp
    # renames.yaml:25 train.accelerator.reshard_after_forward
    config.parallelism.reshard_after_forward = False
    config.optimizer.lr = 0.0002  # renames.yaml:27 train.optimizer.lr
    config.lr_scheduler.lr_min = 1e-06  # renames.yaml:28 train.optimizer.lr_min
    config.lr_scheduler.decay_style = "linear"  # renames.yaml:29 train.optimizer.lr_decay_style
    config.optimizer.weight_decay = 0.05  # renames.yaml:30 train.optimizer.weight_decay
    config.training.max_norm = 0.5  # renames.yaml:31 train.optimizer.max_grad_norm
    config.optimizer.eps = 1e-06  # renames.yaml:32 train.optimizer.eps
    config.optimizer.betas = (0.9, 0.98)  # renames.yaml:33 train.optimizer.betas
    config.optimizer.foreach = False  # renames.yaml:34 train.optimizer.foreach
    config.checkpoint.folder = "runs/renames"  # renames.yaml:36 train.checkpoint.output_dir
    config.checkpoint.interval = 50  # renames.yaml:37 train.checkpoint.save_steps
    config.checkpoint.export_hf = False  # renames.yaml:38 train.checkpoint.save_hf_weights
    config.metrics.log_freq = 5  # renames.yaml:40 train.logging.log_steps
    config.metrics.report_throughput = False  # renames.yaml:41 train.logging.report_throughput
    config.metrics.enable_tensorboard = True  # renames.yaml:43 train.tensorboard.enabled
    # renames.yaml:44 train.tensorboard.output_dir
    config.metrics.save_tb_folder = "runs/renames/tb"
    config.metrics.tb_log_freq = 5  # renames.yaml:45 train.tensorboard.log_steps
    config.metrics.enable_memory_monitor = True  # renames.yaml:47 train.memory_monitor.enabled
    config.metrics.memory_log_freq = 10  # renames.yaml:48 train.memory_monitor.log_steps
    config.profiler.enable_profiling = True  # renames.yaml:50 train.profile.enabled
    # renames.yaml:51 train.profile.output_dir
    config.profiler.save_traces_folder = "runs/renames/profile"
    config.profiler.wait = 2  # renames.yaml:52 train.profile.wait_steps
    config.profiler.active = 2  # renames.yaml:54 train.profile.active_steps
    config.validation.freq = 25  # renames.yaml:56 train.eval.eval_steps
    config.validation.dataset_path = "data/valid.jsonl"  # renames.yaml:57 train.eval.eval_dataset
    config.debug.deterministic = True  # renames.yaml:59 train.debug.deterministic
    config.debug.check_nan_inf = True  # renames.yaml:60 train.debug.check_nan_inf
    config.training.gc_freq = 10  # renames.yaml:61 train.debug.gc_steps
    return config
