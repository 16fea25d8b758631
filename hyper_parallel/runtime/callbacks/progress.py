"""ProgressCallback: a tqdm bar on rank 0 (``total=max_steps``, starts at the resumed step).

Writes to stderr so it never mixes with stdout output; ``HYPER_PARALLEL_DISABLE_TQDM=1`` turns it
off (CI logs). The postfix shows loss and grad norm with 4 decimals, as the legacy bar.
"""

from __future__ import annotations

import os
import sys

from .base import Callback

DISABLE_ENV = "HYPER_PARALLEL_DISABLE_TQDM"


class ProgressCallback(Callback):
    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        self.bar = None

    @property
    def enabled(self) -> bool:
        return bool(self.trainer.is_rank0) and os.environ.get(DISABLE_ENV, "0") not in (
            "1",
            "true",
            "True",
        )

    def on_train_begin(self) -> None:
        if not self.enabled:
            return
        from tqdm.auto import tqdm

        state = self.trainer.state
        self.bar = tqdm(
            total=state.max_steps,
            initial=state.global_step,
            file=sys.stderr,
            desc="train",
            unit="step",
            dynamic_ncols=True,
        )

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        if self.bar is None:
            return
        # Sync to global_step rather than +1: robust if a step is ever skipped or replayed.
        self.bar.update(self.trainer.state.global_step - self.bar.n)
        postfix = {"loss": f"{loss:.4f}"}
        if grad_norm is not None:
            postfix["gnorm"] = f"{grad_norm:.4f}"
        self.bar.set_postfix(postfix, refresh=False)

    def on_train_end(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
