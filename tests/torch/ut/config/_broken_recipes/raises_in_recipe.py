"""Recipes that raise: directly, and from a helper of the module."""

from hyper_parallel.trainer.hyper_trainer import HyperTrainer


def _check(steps: int) -> int:
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")  # RAISES_HERE
    return steps


def bad_steps() -> HyperTrainer.Config:
    config = HyperTrainer.Config()
    config.training.steps = _check(0)
    return config


def missing_key() -> HyperTrainer.Config:
    return {}["no such key"]  # KEY_ERROR_HERE
