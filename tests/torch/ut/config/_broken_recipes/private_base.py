"""A private base recipe (``_base``) and a public recipe derived from it."""

from hyper_parallel.trainer.hyper_trainer import HyperTrainer


def _base() -> HyperTrainer.Config:
    config = HyperTrainer.Config()
    config.training.steps = 2
    return config


def derived() -> HyperTrainer.Config:
    config = _base()
    config.training.steps = 3
    return config
