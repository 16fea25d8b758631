"""Recipe renames_more, converted from renames_more.yaml
(sha256 9f3095cf2bda2afdf77c2d0987b4208cd73b76fd6c460a2aa5007e897a25ed92).

Train it with

    torchrun --nproc_per_node 16 -m hyper_parallel.train --module renames_more --config renames_more

Written by ``python -m hyper_parallel.codegen --from-yaml renames_more.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each, the fields the
YAML changes, commented with the legacy key and the line they come from. Before writing, the
converter executed this module and checked that ``_trainer_config_to_legacy(renames_more())``
equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["renames_more"]


def renames_more() -> HyperTrainer.Config:
    # More renames: architecture overrides, layout degrees, epochs, monitoring.
    config = flavor_baseline("qwen3_5")  # renames_more.yaml:3 model.name
    config.model.num_hidden_layers = 4  # renames_more.yaml:4 model.num_hidden_layers
    config.model.hidden_size = 512  # renames_more.yaml:5 model.hidden_size
    config.model.intermediate_size = 1024  # renames_more.yaml:6 model.intermediate_size
    config.model.num_attention_heads = 8  # renames_more.yaml:7 model.num_attention_heads
    config.model.num_key_value_heads = 2  # renames_more.yaml:8 model.num_key_value_heads
    config.model.vocab_size = 4096  # renames_more.yaml:9 model.vocab_size
    # renames_more.yaml:10 model.max_position_embeddings
    config.model.max_position_embeddings = 8192
    config.dataloader.pin_memory = False  # renames_more.yaml:13 data.pin_memory
    config.training.seq_len = 128  # renames_more.yaml:14 data.max_seq_len
    config.training.max_epochs = 3  # renames_more.yaml:16 train.num_train_epochs
    config.training.init_device = "cpu"  # renames_more.yaml:17 train.init_device
    config.training.global_batch_size = 64  # renames_more.yaml:18 train.global_batch_size
    config.comm.init_timeout_seconds = 600  # renames_more.yaml:19 train.init_timeout_seconds
    config.comm.train_timeout_seconds = 120  # renames_more.yaml:20 train.train_timeout_seconds
    # renames_more.yaml:22 train.accelerator.dp_replicate
    config.parallelism.data_parallel_replicate_degree = 2
    # renames_more.yaml:23 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 2
    config.parallelism.context_parallel_degree = 2  # renames_more.yaml:24 train.accelerator.cp
    config.parallelism.pipeline_parallel_degree = 2  # renames_more.yaml:25 train.accelerator.pp
    config.parallelism.expert_parallel_degree = 2  # renames_more.yaml:26 train.accelerator.ep
    # renames_more.yaml:27 train.accelerator.etp
    config.parallelism.expert_tensor_parallel_degree = 2
    # renames_more.yaml:29 train.logging.model_flops_per_token
    config.metrics.model_flops_per_token = 1500000000
    config.metrics.peak_tflops = 312.0  # renames_more.yaml:30 train.logging.peak_tflops
    # renames_more.yaml:32 train.memory_monitor.reset_peak_each_step
    config.metrics.reset_peak_memory_each_step = True
    config.profiler.warmup = 3  # renames_more.yaml:34 train.profile.warmup_steps
    config.debug.deterministic = True  # renames_more.yaml:36 train.debug.deterministic
    # renames_more.yaml:37 train.debug.deterministic_warn_only
    config.debug.deterministic_warn_only = True
    config.model_spec = None  # model_spec: new-only, at its default in every legacy YAML
    return config
