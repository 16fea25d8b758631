"""Recipe data_packing, converted from data_packing.yaml
(sha256 62f7bc9ed66e76f14e860d8a3555a842915d4221e7ceb51a912efd9fb01b8e5d).

The YAML's header comment:

    Fine-tuning a Qwen3.5 model on its own Alpaca records, packed into 4096-token rows whose
    samples are kept apart (data.packing needs the model's block_causal).

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_packing --config data_packing

Written by ``python -m hyper_parallel.codegen --from-yaml data_packing.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_packing())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_packing"]


def data_packing() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 4)
    config.model.attn_mask_type = "block_causal"  # model.config_overrides (line 6)
    config.tokenizer.path = "assets/tokenizer"  # model.tokenizer_path (line 5)
    config.dataloader.dataset = "json_file"  # data.type (line 9)
    config.dataloader.dataset_path = "data/alpaca.json"  # data.train_path (line 10)
    # data.packing (line 12): whole records, first fit in file order, positions restart per record
    config.dataloader.packing = True
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 5
    config.training.steps = 50  # train.max_steps (line 14)
    config.training.seq_len = 4096  # data.max_seq_len (line 11)
    return config
