"""GCCallback: deterministic garbage collection (``training.gc_freq > 0``).

Python's automatic generational GC can pause a rank at a random point, which on many ranks shows up
as stragglers in collectives. With ``gc_steps = N > 0`` automatic GC is disabled when the trainer
finished initialising (``on_init_end``; also on the first step should the trainer not send that
hook), a full ``gc.collect()`` runs every N steps on every rank, and the previous GC setting is
restored at train end.
"""

from __future__ import annotations

import gc
import logging

from .base import Callback

logger = logging.getLogger(__name__)


class GCCallback(Callback):
    def __init__(self, trainer, *, every: int) -> None:
        super().__init__(trainer)
        self.gc_steps = int(every)
        if self.gc_steps < 0:
            raise ValueError(f"GCCallback: every must be >= 0 (0 keeps automatic GC), got {every}")
        self._was_enabled: bool | None = None  # set while we hold GC disabled
        self.collections = 0

    @property
    def enabled(self) -> bool:
        return self.gc_steps > 0

    def _disable(self) -> None:
        if self.enabled and self._was_enabled is None:
            self._was_enabled = gc.isenabled()
            gc.disable()
            gc.collect()  # start from a clean heap
            logger.debug("automatic GC disabled; collecting every %d steps", self.gc_steps)

    def on_init_end(self) -> None:
        self._disable()

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        if not self.enabled:
            return
        self._disable()
        if self.trainer.state.global_step % self.gc_steps == 0:
            gc.collect()
            self.collections += 1

    def on_train_end(self) -> None:
        if self._was_enabled is not None:
            if self._was_enabled:
                gc.enable()
            self._was_enabled = None
