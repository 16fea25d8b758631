"""Framework-free dtype names.

The legacy YAML writes dtypes as strings. This table is the one place that says which spellings
are accepted and what canonical dtype each one means; each platform maps the canonical names to
its own dtype objects. Config validation uses it without importing any framework.
"""

from __future__ import annotations

#: Accepted spelling -> canonical name.
DTYPE_ALIASES: dict[str, str] = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
}

DTYPE_NAMES: tuple[str, ...] = tuple(DTYPE_ALIASES)


def canonical_dtype_name(name: str) -> str:
    """Return the canonical dtype name for ``name`` or raise ``ValueError`` listing valid names."""
    try:
        return DTYPE_ALIASES[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"unknown dtype {name!r}; valid names are: {', '.join(DTYPE_NAMES)}"
        ) from None
