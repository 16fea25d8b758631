"""Legacy keys the new configuration cannot express, refused by the parser in the same pass as
every other problem of the file.

A key of an ``unsupported`` row of ``codegen/field_table.yaml`` (``train.accelerator.zero_stage``,
``train.backend``, ``model.tp_plan``, ...) set off the default its legacy dataclass declares is a
problem at the key's ``file:line`` (or the override that set it), with the row's reason and fix:
:func:`check_unsupported`, called by the builder for every section. The rows are the generated
:mod:`.unsupported_keys` (``make codegen`` writes it from the table, the one home of every
reason). They are generated *here*, below the legacy schema, because the generated adapter
(:mod:`hyper_parallel.config.legacy_adapter`) lives a layer above the parser, which cannot import
it; without them the parser would report the other problems first and the adapter these only
once those were fixed. The adapter refuses the same keys of a config built without the parser
with :func:`unsupported_problems`: one message, from one function, for both.

Defaults are never restated: the value a key must hold is the one its dataclass declares
(:func:`field_default`). Framework-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hyper_parallel.utils.errors import ConfigError

from .problems import _Context, _dotted
from .unsupported_keys import TABLE, UNSUPPORTED_KEYS


def field_default(cls: type, name: str) -> Any:
    """The default the dataclass ``cls`` declares for its field ``name`` (a fresh value for a
    ``default_factory``)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise TypeError(f"{cls.__qualname__}.{name} has no default")
    raise AttributeError(f"{cls.__qualname__} has no field {name!r}")


def unsupported_message(path: str, value: Any, default: Any) -> str:
    """Why the legacy key ``path`` (a key of :data:`UNSUPPORTED_KEYS`) cannot hold ``value``."""
    line, reason = UNSUPPORTED_KEYS[path]
    return (f"{value!r} is not supported by the new configuration: {reason} "
            f"(default {default!r}; {TABLE}:{line})")


def check_unsupported(cls: type, kwargs: dict, bad: set, path: tuple, ctx: _Context) -> None:
    """The section at ``path`` (class ``cls``, its coerced values ``kwargs``): each unsupported
    key off its default is a problem in ``ctx`` and joins ``bad`` (the field keeps this, its
    first problem: the section's own checks of it, and rules reading it, are moot)."""
    prefix = f"{_dotted(path)}." if path else ""
    for name, value in kwargs.items():
        dotted = prefix + name
        if dotted not in UNSUPPORTED_KEYS or name in bad:
            continue
        default = field_default(cls, name)
        if value != default:
            ctx.add(unsupported_message(dotted, value, default), path + (name,))
            bad.add(name)


def unsupported_problems(legacy: Any) -> list[ConfigError]:
    """Every unsupported key of the built legacy config ``legacy`` that is off its default, as
    a ``ConfigError`` naming the key, in table order (the adapter's refusal)."""
    problems = []
    for dotted in UNSUPPORTED_KEYS:
        *parents, name = dotted.split(".")
        section = legacy
        for part in parents:
            section = getattr(section, part)
        value, default = getattr(section, name), field_default(type(section), name)
        if value != default:
            problems.append(ConfigError(unsupported_message(dotted, value, default), path=dotted))
    return problems


__all__ = ["check_unsupported", "field_default", "unsupported_message", "unsupported_problems"]
