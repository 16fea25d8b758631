"""Recipe overrides_and_comments, converted from overrides_and_comments.yaml
(sha256 d7a4ed4fe159bf0cbc53b8579d0f834a91e0daafab07a8008c52e4f0488497ea).

The YAML's header comment:

    Header comment of the file: it goes into the recipe's docstring.
    A second block, after a blank line.

Train it with

    torchrun --nproc_per_node 1 -m hyper_parallel.train --module overrides_and_comments --config overrides_and_comments

Written by ``python -m hyper_parallel.codegen --from-yaml overrides_and_comments.yaml``. It
starts from flavor_baseline: model 'qwen3_5' (its default flavor) and sets, one line each in the
order of ``HyperTrainer.Config``, the fields the YAML changes, each commented with the legacy
key and line it comes from and the YAML's own comment on that key. Before writing, the converter
executed this module and checked that ``trainer_config_to_legacy(overrides_and_comments())``
equals the canonical form of the YAML.

The YAML's comments on keys that no line sets:

* data (line 10): a section sets no line: its comment goes to the docstring
* train.seed (line 15): This key keeps its default (no line), so its comment goes to the
  docstring.

The YAML's closing comment:

    Comments after the last key go to the docstring too.
"""

from __future__ import annotations

from hyper_parallel.config.baselines import flavor_baseline
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

__all__ = ["overrides_and_comments"]


def overrides_and_comments() -> HyperTrainer.Config:
    config = flavor_baseline("qwen3_5")  # model.name (line 5)
    # model.config_overrides (line 7): A block comment on a dict joins the comment of the line that sets the dict, and so do the comments of its entries
    config.model.config_overrides = {"num_hidden_layers": 2, "rms_norm_eps": 1e-05}
    # from the legacy default of train.optimizer.lr_warmup_ratio and the YAML's other keys
    config.lr_scheduler.warmup_steps = 1
    config.metrics.log_freq = 1  # train.logging.log_steps (line 22)
    # train.max_steps (line 16): trailing comment with a tab\tand a "quote"
    config.training.steps = 5
    # train.global_batch_size (line 20): A block of two comment lines above a key becomes one comment, joined with the key's trailing one. (two sequences per step)
    config.training.global_batch_size = 2
    config.training.seq_len = 32  # data.max_seq_len (line 12)
    return config
