"""The YAML 1.2 core schema: how a plain scalar reads, and the quoting that keeps it so.

The project's one rule for reading YAML -- legacy configs, the field table, the model
descriptors -- is the YAML 1.2 core schema for plain scalars: ``true`` / ``false`` (any case) are
the booleans, ``null`` / ``~`` / nothing is null, integers are decimal (``010`` is ten, ``+1`` is
one), ``0o10`` (eight) or ``0x10`` (sixteen), floats are ``1.5``, ``1e-4``, ``.inf``, ``.nan``.
YAML 1.1 (PyYAML's default) also reads ``on`` / ``off`` / ``yes`` / ``no`` as booleans (which
breaks string fields such as ``activation_checkpoint: off``), ``010`` as eight, ``1_000`` and
``1:30`` as integers, and dates as timestamps: here all of those are strings.

:class:`CoreLoader` is the safe loader with those rules (LibYAML when available);
:func:`dump` writes YAML that this loader *and* YAML 1.1 readers read back as written.
:mod:`hyper_parallel.utils.yaml_lines` builds on it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml
from yaml.nodes import ScalarNode

__all__ = ["CORE_TAG", "FLOAT_RE", "INT_RE", "MAP_TAG", "MERGE_TAG", "SCALAR_TAGS", "SEQ_TAG",
           "CoreLoader", "dump"]

CORE_TAG = "tag:yaml.org,2002:"
"""The prefix of the core tags (``!!str`` is ``tag:yaml.org,2002:str``)."""
_STR, _INT, _FLOAT, _BOOL, _NULL = (CORE_TAG + t for t in ("str", "int", "float", "bool", "null"))
MAP_TAG, SEQ_TAG, MERGE_TAG = CORE_TAG + "map", CORE_TAG + "seq", CORE_TAG + "merge"
SCALAR_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL})
"""The only scalar tags a configuration value may carry."""

INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
"""A YAML 1.2 core-schema integer."""
FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
"""A YAML 1.2 core-schema float (integers match too)."""
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CoreLoader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader with the YAML 1.2 core schema's booleans, integers and floats (no YAML
    1.1 timestamps or ``=`` values either)."""


_DROPPED = {_BOOL, _INT, _FLOAT, CORE_TAG + "timestamp", CORE_TAG + "value"}
CoreLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
CoreLoader.add_implicit_resolver(_BOOL, _BOOL_RE, list("tTfF"))
CoreLoader.add_implicit_resolver(_INT, INT_RE, list("-+0123456789"))
CoreLoader.add_implicit_resolver(_FLOAT, FLOAT_RE, list("-+0123456789."))


def _construct_int(loader: Any, node: ScalarNode) -> int:
    text = str(loader.construct_scalar(node)).strip()
    if not INT_RE.match(text):
        raise ValueError(f"{text!r} is not a YAML 1.2 integer (decimal, 0o octal or 0x hex)")
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


def _construct_float(loader: Any, node: ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).strip()
    lowered = text.lower()
    if lowered.lstrip("+-") == ".inf":
        return -math.inf if lowered.startswith("-") else math.inf
    if lowered == ".nan":
        return math.nan
    if not FLOAT_RE.match(text) or "_" in text:
        raise ValueError(f"{text!r} is not a YAML 1.2 float")
    return float(text)


def _construct_bool(loader: Any, node: ScalarNode) -> bool:
    text = str(loader.construct_scalar(node)).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{text!r} is not a YAML 1.2 boolean (true or false)")
    return text == "true"


CoreLoader.add_constructor(_INT, _construct_int)
CoreLoader.add_constructor(_FLOAT, _construct_float)
CoreLoader.add_constructor(_BOOL, _construct_bool)


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Quotes every string that YAML 1.2 (this loader) *or* YAML 1.1 (PyYAML's default, other
    tools) would read as something else: ``'off'``, ``'010'``, ``'1e-4'`` stay strings for both."""


_Dumper.yaml_implicit_resolvers = {
    first: list(CoreLoader.yaml_implicit_resolvers.get(first, []))
    + list(yaml.SafeDumper.yaml_implicit_resolvers.get(first, []))
    for first in (set(CoreLoader.yaml_implicit_resolvers)
                  | set(yaml.SafeDumper.yaml_implicit_resolvers))
}


def dump(data: Any, **options: Any) -> str:
    """``yaml.safe_dump(data, **options)`` whose text this loader (and YAML 1.1) reads back as
    ``data``."""
    return yaml.dump(data, Dumper=_Dumper, **options)
