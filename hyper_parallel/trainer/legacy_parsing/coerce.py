"""Values as their declared types: a YAML value coerced to a field's annotation, or refused.

A value that does not fit raises :class:`_Mismatch` (the builder turns it into a ``ConfigError``
naming the field, the expected type in words (:func:`describe_type`), the value and where it came
from). Numbers spelled as strings are read as YAML 1.2 spells them; booleans accept
:data:`TRUE_WORDS` and :data:`FALSE_WORDS` in any case.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import types
import typing
from typing import Any

from hyper_parallel.utils.yaml_lines import FLOAT_RE, INT_RE

TRUE_WORDS = frozenset({"true", "yes", "y", "on", "1", "t"})
FALSE_WORDS = frozenset({"false", "no", "n", "off", "0", "f"})


class _Mismatch(Exception):
    """A value does not fit a declared type (turned into a ConfigError by the caller);
    ``reason`` says why when the type alone does not."""

    def __init__(self, reason: str = ""):
        self.reason = reason
        super().__init__(reason)


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != len(typing.get_args(tp)):
            # ``X | None``, or ``X | Y | None`` (the union of the others).
            return True, functools.reduce(operator.or_, args)
    return False, tp


def describe_type(tp: Any) -> str:
    """Human wording of a declared type (``int``, ``list of str``, ``float or null``)."""
    optional, inner = _is_optional(tp)
    if optional:
        return f"{describe_type(inner)} or null"
    origin = typing.get_origin(inner)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in typing.get_args(inner))
    if origin is list:
        (item,) = typing.get_args(inner) or (Any,)
        return f"list of {describe_type(item)}"
    if origin is tuple:
        return "[" + ", ".join(describe_type(a) for a in typing.get_args(inner)) + "]"
    if origin is dict:
        return "mapping"
    if inner is Any:
        return "any value"
    if dataclasses.is_dataclass(inner):
        return f"mapping ({inner.__name__})"
    return getattr(inner, "__name__", str(inner))


def _to_float(value: Any) -> float:
    """``value`` (an int, a float or a number spelled as a string) as a finite float."""
    if isinstance(value, bool):
        raise _Mismatch()
    if isinstance(value, (int, float)):
        try:
            result = float(value)
        except OverflowError:
            raise _Mismatch("too large for a float") from None
    elif isinstance(value, str):
        # A quoted number ("1e-4"), spelled as YAML 1.2 spells numbers.
        text = value.strip()
        if not FLOAT_RE.match(text) or text.lower().lstrip("+-") in (".inf", ".nan"):
            raise _Mismatch()
        result = float(text)
    else:
        raise _Mismatch()
    if not math.isfinite(result):
        raise _Mismatch("not a finite number")
    return result


def _coerce(value: Any, tp: Any) -> Any:
    optional, inner = _is_optional(tp)
    if value is None:
        if optional or inner is Any:
            return None
        raise _Mismatch()
    origin = typing.get_origin(inner)
    if inner is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        # A union of several types (``int | str``): the first that takes the value, in the
        # declared order.
        for arm in typing.get_args(inner):
            try:
                return _coerce(value, arm)
            except _Mismatch:
                continue
        raise _Mismatch()
    if inner is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, (str, int)):
            word = str(value).strip().lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
        raise _Mismatch()
    if inner is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and INT_RE.match(value.strip()):
            # A quoted integer ("8"), spelled as YAML 1.2 spells integers ("1_000" is not one).
            text = value.strip()
            try:
                if text[:2] in ("0o", "0x"):
                    return int(text[2:], 8 if text[1] == "o" else 16)
                return int(text)
            except ValueError:
                raise _Mismatch("too many digits") from None
        raise _Mismatch()
    if inner is float:
        return _to_float(value)
    if inner is str:
        if isinstance(value, str):
            return value
        raise _Mismatch()
    if origin is list:
        (item,) = typing.get_args(inner) or (Any,)
        if not isinstance(value, list):
            raise _Mismatch()
        return [_coerce(v, item) for v in value]
    if origin is tuple:
        item_types = typing.get_args(inner)
        if not isinstance(value, list) or len(value) != len(item_types):
            raise _Mismatch()
        return tuple(_coerce(v, t) for v, t in zip(value, item_types))
    if origin is dict:
        key_type, value_type = typing.get_args(inner) or (Any, Any)
        if not isinstance(value, dict):
            raise _Mismatch()
        out = {}
        for k, v in value.items():
            try:
                key = _coerce(k, key_type)
            except _Mismatch:
                raise _Mismatch(f"the key {k!r} is not a {describe_type(key_type)}") from None
            out[key] = _coerce(v, value_type)
        return out
    raise TypeError(f"the schema uses an unsupported type {tp!r}")  # a bug in the schema
