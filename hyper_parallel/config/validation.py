"""Field checks for the generated config classes (``configs.py``, ``trainer_config.py``).

The generator turns each field of ``codegen/field_table.yaml`` -- its type and constraints --
into one call of these helpers in the class's ``__post_init__``. Every failure is a
:class:`~hyper_parallel.utils.errors.ConfigFieldError` whose message starts with
``<Class>.<field>=<value>:``, like the component Configs' errors, and which carries ``owner``,
``field``, ``value`` and ``reason`` so a command line can name the flag
(``--<section>.<field>``).

Hand-written (not generated) so the generated modules stay short; imports no framework.
"""

from __future__ import annotations

import math
import re
from typing import Any, NoReturn

from hyper_parallel.protocols.configurable import config_name
from hyper_parallel.utils.errors import ConfigFieldError
from hyper_parallel.utils.numbers import MAX_INT, is_finite_number

__all__ = [
    "MAX_INT",
    "ConfigFieldError",
    "check_bool",
    "check_choice",
    "check_float",
    "check_instance",
    "check_int",
    "check_int_list",
    "check_int_or_int_list",
    "check_mapping",
    "check_str",
    "check_str_list",
    "check_str_lists",
    "fail",
    "is_finite_number",
]


def fail(config: Any, name: str, message: str) -> NoReturn:
    """Raise :class:`ConfigFieldError` for ``config.<name>``."""
    raise ConfigFieldError(config_name(type(config)), name, getattr(config, name), message)


def _or_none(optional: bool) -> str:
    return " or None" if optional else ""


def _bounds(config: Any, name: str, minimum: Any, maximum: Any, extra: tuple) -> None:
    value = getattr(config, name)
    if value in extra:
        return
    also = f" (or {', '.join(map(repr, extra))})" if extra else ""
    if minimum is not None and value < minimum:
        fail(config, name, f"must be >= {minimum}{also}")
    if maximum is not None and value > maximum:
        fail(config, name, f"must be <= {maximum}{also}")


def check_int(
    config: Any,
    name: str,
    *,
    optional: bool = False,
    minimum: int | None = None,
    maximum: int | None = None,
    extra: tuple = (),
) -> None:
    """An ``int`` (not a bool) within ``[minimum, maximum]``, or one of ``extra``.

    An unset bound is :data:`MAX_INT` (``-MAX_INT`` below): no field holds an integer that
    overflows what the run can count."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        fail(config, name, "must be an integer" + _or_none(optional))
    if value not in extra:
        if maximum is None and value > MAX_INT:
            fail(config, name, f"must be <= {MAX_INT} (2**53 - 1); it is far beyond any real run")
        if minimum is None and value < -MAX_INT:
            fail(config, name, f"must be >= {-MAX_INT} (-(2**53 - 1))")
    _bounds(config, name, minimum, maximum, extra)


def check_float(
    config: Any,
    name: str,
    *,
    optional: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
    finite: bool = True,
) -> None:
    """A real number (an int or a float, not a bool, not NaN) within the bounds; finite unless
    ``finite=False`` (an infinite learning rate or clipping norm cannot train)."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or (isinstance(value, float) and math.isnan(value))
    ):
        fail(config, name, "must be a number" + _or_none(optional))
    if finite and not is_finite_number(value):
        fail(config, name, "must be a finite number" + _or_none(optional))
    _bounds(config, name, minimum, maximum, ())


def check_bool(config: Any, name: str, *, optional: bool = False) -> None:
    """``True`` or ``False``."""
    value = getattr(config, name)
    if not (isinstance(value, bool) or (value is None and optional)):
        fail(config, name, "must be true or false" + _or_none(optional))


def check_str(
    config: Any,
    name: str,
    *,
    optional: bool = False,
    nonempty: bool = False,
    pattern: str | None = None,
    hint: str | None = None,
) -> None:
    """A string; non-empty and fully matching ``pattern`` when asked (``hint`` describes the
    pattern in the error)."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if not isinstance(value, str):
        fail(config, name, "must be a string" + _or_none(optional))
    if nonempty and not value:
        fail(config, name, "must not be empty" + (" (use None for unset)" if optional else ""))
    if pattern is not None and re.fullmatch(pattern, value) is None:
        fail(config, name, f"is not allowed; expected {hint or pattern}")


def check_choice(config: Any, name: str, choices: tuple, *, optional: bool = False) -> None:
    """One of ``choices`` (a ``Literal`` field)."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or value not in choices:
        fail(config, name, f"choose one of: {', '.join(map(str, choices))}" + _or_none(optional))


def check_str_list(
    config: Any,
    name: str,
    *,
    optional: bool = False,
    nonempty: bool = False,
    choices: tuple | None = None,
) -> None:
    """A list of strings (each non-empty / one of ``choices`` when asked)."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(config, name, "must be a list of strings" + _or_none(optional))
    if nonempty and any(v == "" for v in value):
        fail(config, name, "must not contain empty strings")
    if choices is not None and any(v not in choices for v in value):
        fail(config, name, f"items must be among: {', '.join(choices)}")


def check_int_list(
    config: Any, name: str, *, optional: bool = False, minimum: int | None = None
) -> None:
    """A list of integers (each ``>= minimum`` when asked)."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        fail(config, name, "must be a list of integers" + _or_none(optional))
    if minimum is not None and any(v < minimum for v in value):
        fail(config, name, f"items must be >= {minimum}")


def check_int_or_int_list(
    config: Any, name: str, *, optional: bool = False, minimum: int | None = None
) -> None:
    """An integer or a list of integers (each ``>= minimum`` when asked)."""
    value = getattr(config, name)
    if value is None and optional:
        return
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and abs(v) <= MAX_INT
               for v in items):
        fail(config, name, "must be an integer or a list of integers" + _or_none(optional))
    if minimum is not None and any(v < minimum for v in items):
        fail(config, name, f"must be >= {minimum} (every item of a list)")


def check_str_lists(config: Any, name: str, *, optional: bool = False) -> None:
    """A list of lists of non-empty strings."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if not isinstance(value, list) or not all(
        isinstance(part, list) and all(isinstance(v, str) and v for v in part) for part in value
    ):
        fail(config, name, "must be a list of lists of names" + _or_none(optional))


def check_mapping(config: Any, name: str, *, optional: bool = False) -> None:
    """A dict with string keys."""
    value = getattr(config, name)
    if value is None and optional:
        return
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        fail(config, name, "must be a mapping with string keys" + _or_none(optional))


def check_instance(config: Any, name: str, cls: type, *, optional: bool = False) -> None:
    """An instance of ``cls``."""
    value = getattr(config, name)
    if not (isinstance(value, cls) or (value is None and optional)):
        fail(config, name, f"must be a {config_name(cls)}" + _or_none(optional))
