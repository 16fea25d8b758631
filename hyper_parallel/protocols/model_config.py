"""``Module.Config`` and ``BaseModel.Config`` without the framework: the architecture half of
the module protocol.

A model's Config is configuration: a recipe builds it, the registry holds it, the code generator
compares it, none of which may import torch. So the two base Configs are declared here, and
:mod:`hyper_parallel.protocols.module` / :mod:`hyper_parallel.protocols.model` adopt them
(``Config = ModuleConfig`` in the class body, which makes the module class their owner). A
model Config declared outside its (framework) model class names its owner with a
:class:`~hyper_parallel.protocols.lazy.LazyOwner`, so ``config.build()`` imports the model
only when a model is built.

This module names neither owner, not even lazily: their modules import it, and imports inside
the protocol layer point one way (``tests/test_import_layers.py``). Until the framework modules
are imported, ``ModuleConfig`` / ``BaseModelConfig`` build through the lazy owners the package
gives them (``hyper_parallel/protocols/__init__.py``, which every import of this module runs
first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyper_parallel.protocols.configurable import Configurable

__all__ = ["BaseModelConfig", "ModuleConfig"]


@dataclass(kw_only=True, slots=True)
class ModuleConfig(Configurable.Config):
    """Base of every module Config (``Module.Config``); ``build()`` gives a ``Module``."""


@dataclass(kw_only=True, slots=True)
class BaseModelConfig(ModuleConfig):
    """Base of every model Config (``BaseModel.Config``): the architecture."""

    def update_from_config(self, *, trainer_config: Any) -> None:
        """Derive model settings from the trainer's config, in place, before ``build``.

        The trainer calls it once, after the run's config is final and before the model is
        built; for example a model may copy the training sequence length into its RoPE
        cache size, or refuse a parallelism it cannot shard. Default: no-op.

        Keep it narrow: read only what you need, raise ``ValueError`` naming the trainer
        field for a combination the model cannot run, and do not touch other sections.
        (Override with ``Parent.Config.update_from_config(self, trainer_config=...)`` to
        chain; see configurable.py about ``super()`` in slotted Configs.)
        """
