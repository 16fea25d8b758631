"""What a number in a configuration may be: finite, and an integer no larger than :data:`MAX_INT`.

One home for both rules: the legacy schema, the generated sections, the component Configs and
the model configs all check their numbers with these.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MAX_INT", "is_finite_number"]


MAX_INT = 2**53 - 1
"""The default bound of every integer field (``-MAX_INT <= value <= MAX_INT``): the largest
integer that every consumer of a config value holds exactly -- the LR schedule's and the
throughput's float arithmetic, JSON / YAML / TensorBoard readers -- and far beyond any real run
(``training.steps=10**30`` or a batch of ``2**63`` are typos, not plans). A table row with its own
``maximum`` is bounded by that instead."""


def is_finite_number(value: Any) -> bool:
    """An ``int`` or ``float`` (not a bool) that is neither NaN nor infinite (an ``int`` too
    large to be a float counts as infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the float range
        return False
