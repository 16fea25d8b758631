"""Validation helpers for the component Configs' ``__post_init__``.

Every error is a :class:`~hyper_parallel.utils.errors.ConfigFieldError` (a ``ValueError``) whose
message starts with ``<Owner>.Config.<field>`` and says what is allowed, and which names the
field as ``field`` too, so it points at the field to fix wherever the Config sits in a trainer
config.

The rules are those of the generated sections (:mod:`hyper_parallel.config.validation`): a
number must be finite (an infinite or NaN learning rate cannot train) and an integer is bounded
by :data:`~hyper_parallel.utils.numbers.MAX_INT` unless a field says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hyper_parallel.utils.errors import ConfigFieldError
from hyper_parallel.utils.numbers import MAX_INT, is_finite_number
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "MAX_INT",
    "at_least",
    "field_path",
    "finite_above",
    "integer_at_least",
    "is_finite_number",
    "one_of",
    "require",
]


def field_path(config: Any, field: str) -> str:
    """``<Config qualname>.<field>``, e.g. ``OptimizersContainer.Config.lr``."""
    return f"{type(config).__qualname__}.{field}"


def require(condition: bool, config: Any, field: str, message: str) -> None:
    """``ConfigFieldError("<path>=<value>: <message>")`` unless ``condition``."""
    if not condition:
        raise ConfigFieldError(type(config).__qualname__, field, getattr(config, field), message)


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
    """The field must be a finite number (not a bool) ``>= minimum``."""
    value = getattr(config, field)
    require(is_finite_number(value), config, field, f"must be a finite number >= {minimum}")
    require(value >= minimum, config, field, f"must be a number >= {minimum}")


def finite_above(config: Any, field: str, bound: float) -> None:
    """The field must be a finite number (not a bool) ``> bound``."""
    value = getattr(config, field)
    require(is_finite_number(value), config, field, f"must be a finite number > {bound}")
    require(value > bound, config, field, f"must be > {bound}")


def integer_at_least(
    config: Any, field: str, minimum: int, maximum: int | None = MAX_INT
) -> None:
    """The field must be an ``int`` (not a bool) ``>= minimum`` and ``<= maximum`` (default
    :data:`MAX_INT`; ``None``: unbounded, for a value that is clamped where it is used)."""
    value = getattr(config, field)
    require(
        isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
        config,
        field,
        f"must be an integer >= {minimum}",
    )
    if maximum is not None:
        bound = " (2**53 - 1)" if maximum == MAX_INT else ""
        require(value <= maximum, config, field, f"must be an integer <= {maximum}{bound}")
