"""Recipe data_json_file, converted from data_json_file.yaml
(sha256 853d199091aed61c765fe91cf942e2793790e48323a2488d72424eeec2b75a0b).

The YAML's header comment:

    Alpaca-style supervised fine-tuning (data.type json_file) with a legacy template name.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_json_file --config data_json_file

Written by ``python -m hyper_parallel.codegen --from-yaml data_json_file.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the order of
``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy key and
line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(data_json_file())`` equals the
canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["data_json_file"]


def data_json_file() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 3)
    config.tokenizer.path = "assets/tokenizer"  # model.tokenizer_path (line 4)
    config.dataloader.dataset = "json_file"  # data.type (line 6)
    config.dataloader.dataset_path = "data/alpaca.json"  # data.train_path (line 7)
    # data.template (line 8): any template but `empty`: Human/Assistant text (normalised)
    config.dataloader.template = "human_assistant"
    config.dataloader.max_samples = 1000  # data.train_size (line 9): the first 1000 records
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 5
    config.training.steps = 50  # train.max_steps (line 12)
    config.training.seq_len = 512  # data.max_seq_len (line 10)
    return config
