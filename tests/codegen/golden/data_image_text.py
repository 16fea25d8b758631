"""Recipe data_image_text, converted from data_image_text.yaml
(sha256 84862aa8a4162434da003e8b4141581547c28ab21a97278fbc2d7a81b56ac5da).

The YAML's header comment:

    Image-text supervised fine-tuning, as the upstream vision-language YAMLs write it.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_image_text --config data_image_text

Written by ``python -m hyper_parallel.codegen --from-yaml data_image_text.yaml``. It starts from
flavor_baseline: model 'qwen3_5', flavor '9b_vl' and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_image_text())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_image_text"]


def data_image_text() -> HyperTrainer.Config:
    # model.{name, config_overrides.flavor} (lines 3-7)
    config = flavor_baseline("qwen3_5", "9b_vl")
    config.tokenizer.path = "/models/Qwen3.5-9B"  # model.tokenizer_path (line 4)
    config.dataloader.dataset = "json_file"  # data.type (line 9)
    config.dataloader.dataset_path = "data/vl_sft.jsonl"  # data.train_path (line 10)
    # data.messages_key (line 12): the chat of each record
    config.dataloader.messages_key = "conversations"
    config.dataloader.image_key = "images"  # data.image_key (line 13)
    config.dataloader.processor_path = "/models/Qwen3.5-9B"  # data.processor_path (line 11)
    config.training.seq_len = 4096  # data.max_seq_len (line 14)
    # model.freeze_modules (line 5): the vision tower is not trained
    config.training.freeze_modules = ["model.visual"]
    return config
