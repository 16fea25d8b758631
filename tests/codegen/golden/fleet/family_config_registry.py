"""Recipes converted from 5 legacy YAMLs: one zero-argument function per YAML, each returning a
fresh ``HyperTrainer.Config`` (train one with ``--module M --config NAME``).

What the YAMLs share is set once, in the shared functions ``family_base`` and
``family_cpu_tp2_shared``: each holds what the recipes below it agree on, starting from a flavor
baseline or from another of them. Each recipe calls one of them, the recipe of a YAML whose
settings it contains, or the flavor baseline of its own model, and sets, one line each, the
fields where its YAML differs, commented with the legacy key and the line it comes from. Before
writing, the converter executed this module, called every recipe and checked that each builds
its YAML's configuration and converts back to the YAML's canonical form.

Written by ``python -m hyper_parallel.codegen --from-yaml tests/codegen/fleet_family``.

Sources:

* ``family_cpu``: tests/codegen/fleet_family/family_cpu.yaml
  (sha256 e8778285340a205ddb31e579c6038394c8937a21cef37d5f3ea9b5205328aa1f)
* ``family_cpu_eval``: tests/codegen/fleet_family/family_cpu_eval.yaml
  (sha256 846ee3b88742c2582ad2c3b86ce174cdc35d998d7e4d812ca9dcc51b9bdaea93)
* ``family_fsdp2``: tests/codegen/fleet_family/family_fsdp2.yaml
  (sha256 7bd707bc647d94345c4a73389f24a0fed5abd8f0fc68d82b190f90cd8878f05f)
* ``family_tp2``: tests/codegen/fleet_family/family_tp2.yaml
  (sha256 97edcb9ce3deb5c322272ff2777415b0fe46397ad06832fb419e19bc5911cd86)
* ``family_wide``: tests/codegen/fleet_family/family_wide.yaml
  (sha256 53277c515f64a237426fa6f0f3935beba241fa693ab21ba0fa978bf9e56ab46e)
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = [
    "family_base",
    "family_cpu",
    "family_cpu_eval",
    "family_cpu_tp2_shared",
    "family_fsdp2",
    "family_tp2",
    "family_wide",
]


def family_base() -> HyperTrainer.Config:
    """The settings shared by family_cpu, family_cpu_eval, family_fsdp2 and family_tp2 (4 of the 5
    YAMLs): flavor_baseline: model 'qwen3_5', flavor 'debugmodel', and the 8 fields they agree
    on. Their recipes call it, directly or through another function.
    """
    # the small model every CPU run uses
    # model.name, model.config_overrides.flavor: 4 of 5 YAMLs, lines 3-5
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # data.type: 4 of 5 YAMLs, line 7
    # data.train_path: 4 of 5 YAMLs, line 8
    config.dataloader.dataset_path = "pkg://corpus/train.jsonl"
    config.training.seq_len = 64  # data.max_seq_len: 4 of 5 YAMLs, line 9
    config.dataloader.pin_memory = False  # data.pin_memory: 4 of 5 YAMLs, line 10
    config.training.local_batch_size = 2  # train.micro_batch_size: 4 of 5 YAMLs, line 14
    # CPU ranks talk over gloo
    config.comm.backend = "gloo"  # train.comm_backend: 4 of 5 YAMLs, line 15
    config.metrics.log_freq = 1  # train.logging.log_steps: 4 of 5 YAMLs
    config.debug.deterministic = True  # train.debug.deterministic: 4 of 5 YAMLs
    return config


def family_cpu_tp2_shared() -> HyperTrainer.Config:
    """The settings shared by family_cpu, family_cpu_eval and family_tp2 (3 of the 5 YAMLs): what
    family_base sets, and the 3 fields they agree on beyond it. Their recipes call it, directly
    or through another function.
    """
    config = family_base()  # the settings shared by 4 of 5 YAMLs
    config.training.steps = 10  # train.max_steps: 3 of 5 YAMLs, line 12
    config.training.global_batch_size = 4  # train.global_batch_size: 3 of 5 YAMLs, line 13
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the other keys of 3 of 5 YAMLs
    config.lr_scheduler.warmup_steps = 1
    return config


def family_cpu() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_cpu.yaml.

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module recipes.config_registry --config family_cpu
    """
    # The family's one-rank CPU run: the debug model on the shipped corpus.
    config = family_cpu_tp2_shared()  # the settings shared by 3 of 5 YAMLs
    config.optimizer.lr = 0.001  # family_cpu.yaml:17 train.optimizer.lr
    return config


def family_cpu_eval() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_cpu_eval.yaml.

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module recipes.config_registry --config family_cpu_eval
    """
    # family_cpu plus evaluation and checkpoints: its settings, and three more keys.
    config = family_cpu()  # what family_cpu sets: this YAML has all of its settings
    # keep a checkpoint at every evaluation
    config.checkpoint.interval = 5  # family_cpu_eval.yaml:19 train.checkpoint.save_steps
    config.validation.freq = 5  # family_cpu_eval.yaml:23 train.eval.eval_steps
    # family_cpu_eval.yaml:24 train.eval.eval_dataset
    config.validation.dataset_path = "pkg://corpus/valid.jsonl"
    return config


def family_fsdp2() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_fsdp2.yaml.

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config family_fsdp2
    """
    # FSDP over 2 ranks, a longer run at a higher learning rate.
    config = family_base()  # the settings shared by 4 of 5 YAMLs
    config.training.steps = 20  # family_fsdp2.yaml:12 train.max_steps
    # family_fsdp2.yaml:17 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 2
    config.optimizer.lr = 0.002  # family_fsdp2.yaml:19 train.optimizer.lr
    config.optimizer.weight_decay = 0.1  # family_fsdp2.yaml:20 train.optimizer.weight_decay
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 2
    return config


def family_tp2() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_tp2.yaml.

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config family_tp2
    """
    # Tensor parallel over 2 ranks; shares steps and batch with family_cpu but not its lr.
    config = family_cpu_tp2_shared()  # the settings shared by 3 of 5 YAMLs
    config.parallelism.tensor_parallel_degree = 2  # family_tp2.yaml:17 train.accelerator.tp
    # inferred from the world size
    # family_tp2.yaml:18 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = -1
    config.optimizer.lr = 0.0005  # family_tp2.yaml:20 train.optimizer.lr
    # family_tp2.yaml:22 train.gradient_checkpointing.activation_checkpoint
    config.activation_checkpoint.mode = "selective"
    return config


def family_wide() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_wide.yaml.

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config family_wide
    """
    # The default (0.8b) flavor cut to 2 layers, bf16: another baseline than the rest of the family.
    config = flavor_baseline("qwen3_5")  # family_wide.yaml:3 model.name
    # family_wide.yaml:4 model.config_overrides
    config.model.config_overrides = {"num_hidden_layers": 2}
    config.training.seq_len = 32  # family_wide.yaml:8 data.max_seq_len
    config.training.steps = 4  # family_wide.yaml:10 train.max_steps
    config.training.global_batch_size = 2  # family_wide.yaml:11 train.global_batch_size
    # family_wide.yaml:14 train.accelerator.dp_shard
    config.parallelism.data_parallel_shard_degree = 2
    # family_wide.yaml:16-17 train.mixed_precision.{enabled, param_dtype}
    config.training.mixed_precision_param = "bfloat16"
    config.metrics.log_freq = 1  # family_wide.yaml:19 train.logging.log_steps
    config.debug.deterministic = True  # family_wide.yaml:21 train.debug.deterministic
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    return config
