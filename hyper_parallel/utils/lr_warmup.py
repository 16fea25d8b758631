"""The legacy rule that turns a warmup ratio into a number of warmup steps (framework-free).

The legacy schema writes ``train.optimizer.lr_warmup_ratio``; the new tree writes
``lr_scheduler.warmup_steps``. The LR schedule (``hyper_parallel.runtime.optim``) and the
legacy <-> new transforms (``hyper_parallel.config.transforms``) both apply this rule, and a
recipe converted from a YAML trains bit-identically only if they agree, so it lives here once.
"""

from __future__ import annotations

import math


def warmup_steps_from_ratio(total_steps: int, ratio: float) -> int:
    """``ceil(total_steps * ratio)``, float rounding included (``ceil(10 * 0.15) == 2``)."""
    return math.ceil(total_steps * ratio)


__all__ = ["warmup_steps_from_ratio"]
