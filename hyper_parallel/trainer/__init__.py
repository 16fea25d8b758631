"""Trainers and the legacy configuration.

``HyperTrainer`` (the engine, :mod:`hyper_parallel.trainer.hyper_trainer`) is exported here and
imported on first use: this package's ``__init__`` imports nothing itself, so the legacy schema
(``hyper_parallel.trainer.config``) loads without the engine's modules. None of them imports
torch at import time.
"""

from __future__ import annotations

from hyper_parallel.protocols.lazy import lazy_exports

__all__ = ["HyperTrainer"]

__getattr__, __dir__ = lazy_exports(
    __name__, globals(), {"HyperTrainer": "hyper_parallel.trainer.hyper_trainer"}
)
