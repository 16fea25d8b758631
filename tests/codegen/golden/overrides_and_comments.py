"""Recipe overrides_and_comments, converted from overrides_and_comments.yaml
(sha256 2b4c39da14ac335a99aeba2012b5472ba99545abf1f3414e346dd24ec72e3125).

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module overrides_and_comments --config overrides_and_comments

Written by ``python -m hyper_parallel.codegen --from-yaml overrides_and_comments.yaml``. It
starts from flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each, the
fields the YAML changes, commented with the legacy key and the line they come from. Before
writing, the converter executed this module and checked that
``_trainer_config_to_legacy(overrides_and_comments())`` equals the canonical form of the YAML.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.trainer_config import HyperTrainer

__all__ = ["overrides_and_comments"]


def overrides_and_comments() -> HyperTrainer.Config:
    # Header comment of the file: it goes above the baseline line.
    # A second block, after a blank line.
    config = flavor_baseline("qwen3_5")  # overrides_and_comments.yaml:5 model.name
    # Comments on dict entries follow the entries.
    # no flavor: the model's default one
    # overrides_and_comments.yaml:7 model.config_overrides
    config.model.config_overrides = {"num_hidden_layers": 2, "rms_norm_eps": 1e-05}
    # a section comment moves to the next line below it
    config.training.seq_len = 32  # overrides_and_comments.yaml:12 data.max_seq_len
    # This key keeps its default, so its comment moves down to the next line.
    # trailing comment with a tab\tand a "quote"
    config.training.steps = 5  # overrides_and_comments.yaml:16 train.max_steps
    config.training.global_batch_size = 2  # overrides_and_comments.yaml:18 train.global_batch_size
    config.metrics.log_freq = 1  # overrides_and_comments.yaml:20 train.logging.log_steps
    # lr_scheduler.warmup_steps: follows from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    # Comments after the last key end the function.
    return config
