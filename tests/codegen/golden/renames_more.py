"""Recipe renames_more, converted from renames_more.yaml
(sha256 6820e03b114cb98b1e109ad2212ef65649f877af0d9c2e7496508a265a8930a3).

The YAML's header comment:

    More renames: architecture overrides, layout degrees, epochs, monitoring.

Train it with

    torchrun --nproc_per_node 16 -m hyper_parallel.train --module renames_more --config renames_more

Written by ``python -m hyper_parallel.codegen --from-yaml renames_more.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(renames_more())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["renames_more"]


def renames_more() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    # new-only: the legacy schema names the model by model.name only; the spec registered under that name is used when model_spec is unset
    config.model_spec = None
    config.model.num_hidden_layers = 4  # model.num_hidden_layers (line 4)
    config.model.hidden_size = 512  # model.hidden_size (line 5)
    config.model.intermediate_size = 1024  # model.intermediate_size (line 6)
    config.model.num_attention_heads = 8  # model.num_attention_heads (line 7)
    config.model.num_key_value_heads = 2  # model.num_key_value_heads (line 8)
    config.model.vocab_size = 4096  # model.vocab_size (line 9)
    config.model.max_position_embeddings = 8192  # model.max_position_embeddings (line 10)
    # model.kernels (line 11): the Gated DeltaNet layers on the torch path, on any device
    config.model.kernels = "torch"
    config.dataloader.pin_memory = False  # data.pin_memory (line 14)
    # train.logging.model_flops_per_token (line 38)
    config.metrics.model_flops_per_token = 1500000000
    config.metrics.peak_tflops = 312.0  # train.logging.peak_tflops (line 39)
    # train.memory_monitor.reset_peak_each_step (line 41)
    config.metrics.reset_peak_memory_each_step = True
    config.profiler.warmup = 3  # train.profile.warmup_steps (line 43)
    config.training.max_epochs = 3  # train.num_train_epochs (line 17)
    config.training.global_batch_size = 64  # train.global_batch_size (line 19)
    config.training.seq_len = 128  # data.max_seq_len (line 15)
    config.training.init_device = "cpu"  # train.init_device (line 18)
    # train.accelerator.dp_replicate (line 23)
    config.parallelism.data_parallel_replicate_degree = 2
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 24)
    config.parallelism.context_parallel_degree = 2  # train.accelerator.cp (line 25)
    # train.accelerator.ulysses_degree (line 26): the all-gather form of the attention
    config.parallelism.context_parallel_ulysses_degree = 1
    # train.accelerator.linear_attention_cp_mode (line 27)
    config.parallelism.context_parallel_linear_attention_mode = "p2p"
    config.parallelism.context_parallel_async = True  # train.accelerator.async_cp (line 28)
    config.parallelism.pipeline_parallel_degree = 2  # train.accelerator.pp (line 29)
    config.parallelism.expert_parallel_degree = 2  # train.accelerator.ep (line 30)
    config.parallelism.expert_tensor_parallel_degree = 2  # train.accelerator.etp (line 31)
    # train.accelerator.fsdp_forward_prefetch (line 32): gather the next layer early
    config.parallelism.fsdp_forward_prefetch = 1
    # train.accelerator.fsdp_backward_prefetch (line 33)
    config.parallelism.fsdp_backward_prefetch = 2
    # train.gradient_checkpointing.activation_checkpoint (line 35)
    config.activation_checkpoint.mode = "full"
    # train.gradient_checkpointing.num_layers (line 36): one count per pipeline stage
    config.activation_checkpoint.num_layers = [3, 1]
    config.comm.init_timeout_seconds = 600  # train.init_timeout_seconds (line 20)
    config.comm.train_timeout_seconds = 120  # train.train_timeout_seconds (line 21)
    config.debug.deterministic = True  # train.debug.deterministic (line 45)
    config.debug.deterministic_warn_only = True  # train.debug.deterministic_warn_only (line 46)
    return config
