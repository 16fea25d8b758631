"""Recipe unsupported_at_default, converted from unsupported_at_default.yaml
(sha256 4e13738f694173876af1ccb4e0560237d74267cbe26d6d33496042fd553991f6).

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module unsupported_at_default --config unsupported_at_default

Written by ``python -m hyper_parallel.codegen --from-yaml unsupported_at_default.yaml``. It
starts from flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each, the
fields the YAML changes, commented with the legacy key and the line they come from. Before
writing, the converter executed this module and checked that
``_trainer_config_to_legacy(unsupported_at_default())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["unsupported_at_default"]


def unsupported_at_default() -> HyperTrainer.Config:
    # An unsupported row at its legacy default converts: the report names it, nothing is lost.
    config = flavor_baseline("qwen3_5")  # unsupported_at_default.yaml:3 model.name
    return config
