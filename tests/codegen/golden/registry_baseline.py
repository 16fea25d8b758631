"""Recipe registry_baseline, converted from registry_baseline.yaml
(sha256 a1485a64abe57075615ec1e201eba78331579d2326c17c18687a52bf9965630e).

The YAML's header comment:

    A YAML naming a model that has a recipe registry: the registry recipe it matches best is the
    baseline (it leaves fewer lines than the flavor baseline).

Train it with

    torchrun --nproc_per_node 2 -m hyper_parallel.train --module registry_baseline --config registry_baseline

Written by ``python -m hyper_parallel.codegen --from-yaml registry_baseline.yaml``. It starts
from registry recipe
hyper_parallel.models.qwen3_5_v2.config_registry.qwen3_5_v2_debugmodel_fsdp2 and sets, one line
each in the order of ``HyperTrainer.Config``, the fields the YAML changes, each commented with
the legacy key and line it comes from and the YAML's own comment on that key. Before writing,
the converter executed this module and checked that
``trainer_config_to_legacy(registry_baseline())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel_fsdp2
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["registry_baseline"]


def registry_baseline() -> HyperTrainer.Config:
    config = qwen3_5_v2_debugmodel_fsdp2()  # model.{name, config_overrides.flavor} (lines 4-6)
    config.dump_folder = "."  # new-only: the legacy outputs are relative to the working directory
    # train.checkpoint.output_dir (line 24)
    config.checkpoint.folder = "outputs/qwen3_5_v2_debugmodel_fsdp2"
    return config
