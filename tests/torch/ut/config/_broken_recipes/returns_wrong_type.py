"""Recipes returning something else than a ``HyperTrainer.Config``."""

from dataclasses import dataclass

from hyper_parallel.config.configs import TrainingConfig
from hyper_parallel.trainer.hyper_trainer import HyperTrainer


@dataclass
class Other:
    steps: int = 1


def returns_none():
    return None


def returns_dict():
    return {"training": {"steps": 3}}


def returns_class():
    return HyperTrainer.Config


def returns_section():
    return TrainingConfig()


def returns_other_dataclass():
    return Other()


class NotARecipe:
    """A class of the module: a name that is not a recipe."""
