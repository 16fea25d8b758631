"""Recipe model_causal_default, converted from model_causal_default.yaml
(sha256 866ece8308ab285f1b024ad90f83ee220a5c293115f673fe3384eea5119f020c).

The YAML's header comment:

    attn_mask_type: causal is the default: the recipe states nothing for it.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module model_causal_default --config model_causal_default

Written by ``python -m hyper_parallel.codegen --from-yaml model_causal_default.yaml``. It starts
from flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order
of ``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(model_causal_default())``
equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["model_causal_default"]


def model_causal_default() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    config.training.steps = 10  # train.max_steps (line 7)
    return config
