"""Configuration values as Python source: data, never code.

A recipe written by ``--from-yaml`` holds the user's values (paths, names, free text). They are
written as literals -- ``repr`` of a ``str`` is an exact, inert string literal whatever the
string holds (quotes, newlines, backslashes, unicode, ``__import__(...)``) -- and every literal is
checked to read back, with :func:`ast.literal_eval`, to the very value it came from. Dataclass
values (a component ``Config``) become a constructor call of their class, with only the fields
that differ from the class defaults; the import they need is returned with the text.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from typing import Any

from hyper_parallel.codegen.errors import CodegenError


@dataclasses.dataclass
class Expression:
    """Python source for a value and the ``(module, name)`` imports it needs."""

    text: str
    imports: set[tuple[str, str]] = dataclasses.field(default_factory=set)


def _plain(value: Any, where: str) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            raise CodegenError(f"{where}: NaN cannot be a configuration value")
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, tuple):
        items = [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_plain(v, f"{where}[{i}]") for i, v in enumerate(value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(
            f"{_plain(k, f'{where} key')}: {_plain(v, f'{where}[{k!r}]')}" for k, v in value.items()
        ) + "}"
    raise CodegenError(
        f"{where}: a value of type {type(value).__name__} ({value!r}) cannot be written as a "
        "Python literal; configuration values are None, bool, int, float, str, or tuples, "
        "lists and dicts of them"
    )


def _contains_inf(value: Any) -> bool:
    if isinstance(value, float):
        return math.isinf(value)
    if isinstance(value, (tuple, list)):
        return any(_contains_inf(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_inf(v) for v in value.values())
    return False


def literal(value: Any, where: str) -> Expression:
    """The source of ``value``; ``where`` (a field path) names it in errors."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _constructor(value, where)
    text = _plain(value, where)
    if not _contains_inf(value):
        # The guarantee this module exists for: the text is a literal that reads back exactly.
        back = ast.literal_eval(text)
        if back != value or type(back) is not type(value):
            raise CodegenError(f"{where}: {value!r} does not round-trip as a literal ({text})")
    return Expression(text)


def class_reference(cls: type) -> tuple[str, tuple[str, str]]:
    """``(source naming cls, import)``: ``OptimizersContainer.Config`` needs
    ``from <module> import OptimizersContainer``."""
    qualname = cls.__qualname__
    if "<locals>" in qualname:
        raise CodegenError(f"{qualname}: a class defined inside a function cannot be imported")
    top = qualname.split(".", 1)[0]
    return qualname, (cls.__module__, top)


def _constructor(value: Any, where: str) -> Expression:
    cls = type(value)
    name, imported = class_reference(cls)
    try:
        default = cls()
    except TypeError as exc:
        raise CodegenError(f"{where}: {name}() needs arguments ({exc}); cannot write it") from None
    imports = {imported}
    args = []
    for f in dataclasses.fields(value):
        if not f.init:
            continue
        current = getattr(value, f.name)
        if current == getattr(default, f.name) and type(current) is type(getattr(default, f.name)):
            continue
        sub = literal(current, f"{where}.{f.name}")
        imports |= sub.imports
        args.append(f"{f.name}={sub.text}")
    return Expression(f"{name}({', '.join(args)})", imports)
