"""Trainers and the legacy configuration.

``HyperTrainer`` (the engine, :mod:`hyper_parallel.trainer.hyper_trainer`) is exported here and
imported on first use: this package's ``__init__`` imports nothing itself, so the legacy schema
(``hyper_parallel.trainer.config``) loads without the engine's modules. None of them imports
torch at import time.

The legacy trainer's helper modules moved to :mod:`hyper_parallel.runtime`; their old paths
(``hyper_parallel.trainer.parallel_dims``, ``hyper_parallel.trainer.callbacks``, ...) are the
modules at the new ones (:data:`MOVED`, :mod:`hyper_parallel.utils.moved_modules`).
"""

from __future__ import annotations

from hyper_parallel.protocols.lazy import lazy_exports
from hyper_parallel.utils.moved_modules import alias_moved_modules

__all__ = ["HyperTrainer"]

__getattr__, __dir__ = lazy_exports(
    __name__, globals(), {"HyperTrainer": "hyper_parallel.trainer.hyper_trainer"}
)

#: ``{old module under hyper_parallel.trainer: its module now}``.
MOVED: dict[str, str] = {
    name: f"hyper_parallel.runtime.{name}"
    for name in ("callbacks", "checkpoint", "distributed", "faults", "loss", "model_setup",
                 "optim", "parallel_dims", "step")
}

alias_moved_modules(__name__, MOVED)
