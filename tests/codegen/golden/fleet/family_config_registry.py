"""Recipes converted from 5 legacy YAMLs: one zero-argument function per YAML, each returning a
fresh ``HyperTrainer.Config`` (train one with ``--module M --config NAME``).

What the YAMLs share is set once, in the shared functions ``family_base`` and
``family_cpu_tp2_shared``: each holds what the recipes below it agree on, starting from a flavor
baseline or from another of them. Each recipe calls one of them, the recipe of a YAML whose
settings it contains, or the flavor baseline of its own model, and sets, one line each in the
order of ``HyperTrainer.Config``, the fields where its YAML differs, each commented with the
legacy key and line it comes from and the YAML's own comment on that key. Before writing, the
converter executed this module, called every recipe and checked that each builds its YAML's
configuration and converts back to the YAML's canonical form.

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
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

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
    # model.{name, config_overrides.flavor} (4 of 5 YAMLs, lines 3-5): the small model every CPU run uses
    config = flavor_baseline("qwen3_5", "debugmodel")
    config.dataloader.dataset = "jsonl"  # data.type (4 of 5 YAMLs, line 7)
    # data.train_path (4 of 5 YAMLs, line 8)
    config.dataloader.dataset_path = "pkg://corpus/train.jsonl"
    config.dataloader.pin_memory = False  # data.pin_memory (4 of 5 YAMLs, line 10)
    config.metrics.log_freq = 1  # train.logging.log_steps (4 of 5 YAMLs)
    config.training.local_batch_size = 2  # train.micro_batch_size (4 of 5 YAMLs, line 14)
    config.training.seq_len = 64  # data.max_seq_len (4 of 5 YAMLs, line 9)
    # train.comm_backend (4 of 5 YAMLs, line 15): CPU ranks talk over gloo
    config.comm.backend = "gloo"
    config.debug.deterministic = True  # train.debug.deterministic (4 of 5 YAMLs)
    return config


def family_cpu_tp2_shared() -> HyperTrainer.Config:
    """The settings shared by family_cpu, family_cpu_eval and family_tp2 (3 of the 5 YAMLs): what
    family_base sets, and the 3 fields they agree on beyond it. Their recipes call it, directly
    or through another function.
    """
    config = family_base()  # the settings shared by 4 of 5 YAMLs
    # from the legacy default of train.optimizer.lr_warmup_ratio and the other keys of 3 of 5 YAMLs
    config.lr_scheduler.warmup_steps = 1
    config.training.steps = 10  # train.max_steps (3 of 5 YAMLs, line 12)
    config.training.global_batch_size = 4  # train.global_batch_size (3 of 5 YAMLs, line 13)
    return config


def family_cpu() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_cpu.yaml.

    The YAML's header comment:

        The family's one-rank CPU run: the debug model on the shipped corpus.

    Train it with

        torchrun --nproc_per_node 1 -m hyper_parallel.train --module recipes.config_registry --config family_cpu
    """
    config = family_cpu_tp2_shared()  # the settings shared by 3 of 5 YAMLs
    config.optimizer.lr = 0.001  # train.optimizer.lr (line 17)
    return config


def family_cpu_eval() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_cpu_eval.yaml.

    The YAML's header comment:

        family_cpu plus evaluation and checkpoints: its settings, and three more keys.

    Train it with

        torchrun --nproc_per_node 1 -m hyper_parallel.train --module recipes.config_registry --config family_cpu_eval
    """
    config = family_cpu()  # what family_cpu sets: this YAML has all of its settings
    # train.checkpoint.save_steps (line 19): keep a checkpoint at every evaluation
    config.checkpoint.interval = 5
    config.validation.freq = 5  # train.eval.eval_steps (line 23)
    config.validation.dataset_path = "pkg://corpus/valid.jsonl"  # train.eval.eval_dataset (line 24)
    return config


def family_fsdp2() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_fsdp2.yaml.

    The YAML's header comment:

        FSDP over 2 ranks, a longer run at a higher learning rate.

    Train it with

        torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config family_fsdp2
    """
    config = family_base()  # the settings shared by 4 of 5 YAMLs
    config.optimizer.lr = 0.002  # train.optimizer.lr (line 19)
    config.optimizer.weight_decay = 0.1  # train.optimizer.weight_decay (line 20)
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 2
    config.training.steps = 20  # train.max_steps (line 12)
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 17)
    return config


def family_tp2() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_tp2.yaml.

    The YAML's header comment:

        Tensor parallel over 2 ranks; shares steps and batch with family_cpu but not its lr.

    Train it with

        torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config family_tp2
    """
    config = family_cpu_tp2_shared()  # the settings shared by 3 of 5 YAMLs
    config.optimizer.lr = 0.0005  # train.optimizer.lr (line 20)
    # train.accelerator.dp_shard (line 18): inferred from the world size
    config.parallelism.data_parallel_shard_degree = -1
    config.parallelism.tensor_parallel_degree = 2  # train.accelerator.tp (line 17)
    # train.gradient_checkpointing.activation_checkpoint (line 22)
    config.activation_checkpoint.mode = "selective"
    return config


def family_wide() -> HyperTrainer.Config:
    """Converted from tests/codegen/fleet_family/family_wide.yaml.

    The YAML's header comment:

        The default (0.8b) flavor cut to 2 layers, bf16: another baseline than the rest of the family.

    Train it with

        torchrun --nproc_per_node 2 -m hyper_parallel.train --module recipes.config_registry --config family_wide
    """
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    config.model.config_overrides = {"num_hidden_layers": 2}  # model.config_overrides (line 4)
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    config.metrics.log_freq = 1  # train.logging.log_steps (line 19)
    config.training.steps = 4  # train.max_steps (line 10)
    config.training.global_batch_size = 2  # train.global_batch_size (line 11)
    config.training.seq_len = 32  # data.max_seq_len (line 8)
    # train.mixed_precision.{enabled, param_dtype} (lines 16-17)
    config.training.mixed_precision_param = "bfloat16"
    config.parallelism.data_parallel_shard_degree = 2  # train.accelerator.dp_shard (line 14)
    config.debug.deterministic = True  # train.debug.deterministic (line 21)
    return config
