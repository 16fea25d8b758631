"""A recipe that leaves an invalid value in its config (set after construction, so only the
command line's re-validation sees it)."""

from hyper_parallel.trainer.hyper_trainer import HyperTrainer


def zero_steps() -> HyperTrainer.Config:
    config = HyperTrainer.Config()
    config.training.steps = 0
    return config
