"""Validation helpers for the component Configs' ``__post_init__``.

Every error is a ``ValueError`` whose message starts with ``<Owner>.Config.<field>`` and says
what is allowed, so it points at the field to fix wherever the Config sits in a trainer config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hyper_parallel.utils.suggest import did_you_mean


def field_path(config: Any, field: str) -> str:
    """``<Config qualname>.<field>``, e.g. ``OptimizersContainer.Config.lr``."""
    return f"{type(config).__qualname__}.{field}"


def require(condition: bool, config: Any, field: str, message: str) -> None:
    """``ValueError("<path>=<value>: <message>")`` unless ``condition``."""
    if not condition:
        value = getattr(config, field)
        raise ValueError(f"{field_path(config, field)}={value!r}: {message}")


def one_of(config: Any, field: str, choices: Sequence[Any]) -> None:
    """The field's value must be one of ``choices`` (a suggestion is offered for near misses)."""
    value = getattr(config, field)
    require(
        value in choices,
        config,
        field,
        f"not allowed{did_you_mean(str(value), map(str, choices))}; choose one of: "
        f"{', '.join(map(str, choices))}",
    )


def at_least(config: Any, field: str, minimum: float) -> None:
    """The field must be a number (not a bool) ``>= minimum``."""
    value = getattr(config, field)
    require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and value >= minimum,
        config,
        field,
        f"must be a number >= {minimum}",
    )


def integer_at_least(config: Any, field: str, minimum: int) -> None:
    """The field must be an ``int`` (not a bool) ``>= minimum``."""
    value = getattr(config, field)
    require(
        isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
        config,
        field,
        f"must be an integer >= {minimum}",
    )
