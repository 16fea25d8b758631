"""GradientHealthCallback: abort on a non-finite gradient norm or loss (``debug.check_nan_inf``).

Checked in ``on_pre_optimizer_step`` - dispatched before logging and, crucially, before the optimizer
step, so NaN/inf never reach the weights - and on the reported loss in ``on_step_end``. The grad norm
and loss are global (all-reduced) values, so every rank sees the same verdict: every rank logs the
error and raises, instead of rank 0 raising while the others hang in the next collective.
"""

from __future__ import annotations

import logging
import math

from .base import Callback

logger = logging.getLogger(__name__)


class GradientHealthCallback(Callback):
    def __init__(self, trainer, *, enabled: bool) -> None:
        super().__init__(trainer)
        self.enabled = bool(enabled)

    def _check(self, what: str, value: float | None) -> None:
        if value is None or math.isfinite(float(value)):
            return
        step = self.trainer.state.global_step
        msg = (
            f"non-finite {what} ({float(value)}) at step {step} on rank {self.trainer.rank}; "
            "aborting because debug.check_nan_inf is set"
        )
        logger.error(msg)
        raise RuntimeError(msg)

    def on_pre_optimizer_step(self, grad_norm: float | None) -> None:
        if self.enabled:
            self._check("gradient norm", grad_norm)

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        if self.enabled:
            self._check("loss", loss)
            self._check("gradient norm", grad_norm)
