"""Recipe data_json_file, converted from data_json_file.yaml
(sha256 853d199091aed61c765fe91cf942e2793790e48323a2488d72424eeec2b75a0b).

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module data_json_file --config data_json_file

Written by ``python -m hyper_parallel.codegen --from-yaml data_json_file.yaml``. It starts from
flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each, the fields the
YAML changes, commented with the legacy key and the line they come from. Before writing, the
converter executed this module and checked that ``_trainer_config_to_legacy(data_json_file())``
equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["data_json_file"]


def data_json_file() -> HyperTrainer.Config:
    # Alpaca-style supervised fine-tuning (data.type json_file) with a legacy template name.
    config = flavor_baseline("qwen3_5")  # data_json_file.yaml:3 model.name
    config.tokenizer.path = "assets/tokenizer"  # data_json_file.yaml:4 model.tokenizer_path
    config.dataloader.dataset = "json_file"  # data_json_file.yaml:6 data.type
    config.dataloader.dataset_path = "data/alpaca.json"  # data_json_file.yaml:7 data.train_path
    # any template but `empty`: Human/Assistant text (normalised)
    config.dataloader.template = "human_assistant"  # data_json_file.yaml:8 data.template
    # the first 1000 records
    config.dataloader.max_samples = 1000  # data_json_file.yaml:9 data.train_size
    config.training.seq_len = 512  # data_json_file.yaml:10 data.max_seq_len
    config.training.steps = 50  # data_json_file.yaml:12 train.max_steps
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 5
    return config
