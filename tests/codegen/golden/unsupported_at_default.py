"""Recipe unsupported_at_default, converted from unsupported_at_default.yaml
(sha256 6472ebed0e2e98a0bb48c764cd3f1cd07cfd2af0f692281a71f8d19f52f450ee).

The YAML's header comment:

    Unsupported rows at their legacy defaults convert: the report names them, nothing is lost.
    (A real alignment YAML of the legacy code base writes its accelerator keys out like this.)

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module unsupported_at_default --config unsupported_at_default

Written by ``python -m hyper_parallel.codegen --from-yaml unsupported_at_default.yaml``. It
starts from flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the
order of ``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy
key and line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(unsupported_at_default())``
equals the canonical form of the YAML.

The YAML's comments on keys that no line sets:

* train.accelerator.comm_fusion (line 12): what fully_shard does: one all-gather /
  reduce-scatter per unit
* train.accelerator.npu_nums_per_device (line 15): as the legacy Qwen3-VL example writes it
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["unsupported_at_default"]


def unsupported_at_default() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 4)
    return config
