"""A function that needs an argument is not a recipe; one with defaults is."""

from hyper_parallel.trainer.hyper_trainer import HyperTrainer


def sized(steps: int) -> HyperTrainer.Config:
    config = HyperTrainer.Config()
    config.training.steps = steps
    return config


def sized_with_default(steps: int = 4) -> HyperTrainer.Config:
    return sized(steps)


def keyword_only(*, steps: int) -> HyperTrainer.Config:
    return sized(steps)
