"""Recipe model_block_causal, converted from model_block_causal.yaml
(sha256 4c37f447d4919a4e1b7474b2beaf7a0a75d7d9c80f48422510bb71e9819cf2b2).

The YAML's header comment:

    Fine-tuning on packed rows (a preset_pt file written by DataCollatorWithFlattening: positions
    restart at 0 where each document begins), the documents kept apart.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module model_block_causal --config model_block_causal

Written by ``python -m hyper_parallel.codegen --from-yaml model_block_causal.yaml``. It starts
from flavor_baseline: model 'qwen3_5', flavor 'debugmodel' and sets, one line each in the order
of ``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(model_block_causal())`` equals
the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["model_block_causal"]


def model_block_causal() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 4-6)
    config = flavor_baseline("qwen3_5", "debugmodel")
    # model.config_overrides (line 5): the legacy spelling: a model-config field
    config.model.attn_mask_type = "block_causal"
    config.dataloader.dataset = "preset_pt"  # data.type (line 9)
    config.dataloader.dataset_path = "/data/sft/packed_batches.pt"  # data.train_path (line 10)
    config.dataloader.shuffle = False  # data.shuffle (line 12)
    config.training.seq_len = 4096  # data.max_seq_len (line 11)
    return config
