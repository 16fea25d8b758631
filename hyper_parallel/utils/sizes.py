"""File sizes written the way Hugging Face writes them (``"50GB"``, ``"500MB"``, ``"2GiB"``):
one parser for the configuration and the runtime, framework-free.

``huggingface_hub.serialization.parse_size_to_int`` (what ``save_pretrained(max_shard_size=...)``
calls) reads a decimal number and one of ``KB`` / ``MB`` / ``GB`` / ``TB`` (powers of 1000);
transformers 4 also read ``KiB`` / ``MiB`` / ``GiB`` (powers of 1024). Both are accepted here,
case-insensitively, so a size copied from either works.
"""

from __future__ import annotations

import math
import re

__all__ = ["BYTE_SIZE_HINT", "HF_DEFAULT_MAX_SHARD_SIZE", "parse_byte_size"]

#: transformers' ``PreTrainedModel.save_pretrained`` default ``max_shard_size`` (5.x; 4.x wrote
#: "5GB"). ``tests/torch/ut/trainer/test_checkpoint.py`` compares it with the installed one.
HF_DEFAULT_MAX_SHARD_SIZE = "50GB"

_UNITS = {
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)\s*$", re.IGNORECASE)

#: What a valid size looks like, for error messages.
BYTE_SIZE_HINT = (
    "a positive number and a unit, as transformers' max_shard_size is written: KB, MB, GB, TB "
    "(powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. '50GB' or '500MB'"
)


def parse_byte_size(text: str) -> int:
    """The number of bytes ``text`` names (at least 1); a ``ValueError`` saying what is allowed
    otherwise."""
    match = _SIZE.match(text) if isinstance(text, str) else None
    unit = _UNITS.get(match.group(2).lower()) if match else None
    if unit is None:
        raise ValueError(f"{text!r} is not a size: write {BYTE_SIZE_HINT}")
    value = math.floor(float(match.group(1)) * unit)
    if value < 1:
        raise ValueError(f"{text!r} is less than one byte: write {BYTE_SIZE_HINT}")
    return value
