"""``LLMTrainer(args)``: the legacy front door of the engine.

``LLMTrainer(args).train()`` trains what a legacy ``HyperTrainerConfig`` (``model`` / ``data`` /
``train``, from ``parse_args``) describes, as it always did -- by converting ``args`` with the
generated adapter (``_legacy_to_trainer_config``) and training the result with
:class:`~hyper_parallel.trainer.hyper_trainer.HyperTrainer`. There is no second trainer: a YAML
and its converted recipe are the same run, and their checkpoints are interchangeable.

``trainer.args`` keeps the legacy config for user code and callbacks that read it;
``trainer.config`` is the ``HyperTrainer.Config`` the engine runs.
"""

from __future__ import annotations

from hyper_parallel.config.legacy_adapter import _legacy_to_trainer_config
from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.trainer.hyper_trainer import HyperTrainer


class LLMTrainer(HyperTrainer):
    """Causal language-model training from a legacy ``HyperTrainerConfig``."""

    def __init__(self, args: HyperTrainerConfig):
        if not isinstance(args, HyperTrainerConfig):
            raise TypeError(
                f"LLMTrainer(args) expects the legacy HyperTrainerConfig (from parse_args), got "
                f"{type(args).__qualname__}; build a HyperTrainer.Config with config.build()"
            )
        self.args = args
        super().__init__(_legacy_to_trainer_config(args))


__all__ = ["LLMTrainer"]
