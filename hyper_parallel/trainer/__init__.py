"""Trainers and the legacy configuration.

``HyperTrainer`` (the engine, :mod:`hyper_parallel.trainer.hyper_trainer`) is exported here and
imported on first use: this package's ``__init__`` imports nothing itself, so the legacy schema
(``hyper_parallel.trainer.config``) loads without the engine's modules. None of them imports
torch at import time.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HyperTrainer"]


def __getattr__(name: str) -> Any:
    """``HyperTrainer``, imported when first asked for (PEP 562)."""
    if name == "HyperTrainer":
        from hyper_parallel.trainer.hyper_trainer import HyperTrainer

        return HyperTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
