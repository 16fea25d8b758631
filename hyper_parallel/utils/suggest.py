"""'Did you mean ...?' suggestions for misspelled names."""

from __future__ import annotations

import difflib
from typing import Iterable


def closest(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to ``name`` (case-insensitive), or None when nothing is close."""
    pool = list(candidates)
    lowered = {c.lower(): c for c in pool}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=cutoff)
    return lowered[match[0]] if match else None


def did_you_mean(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean 'x'?)`` or an empty string."""
    match = closest(name, candidates, cutoff)
    return f" (did you mean {match!r}?)" if match else ""
