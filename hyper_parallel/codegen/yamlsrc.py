"""Load the field table and the model descriptors with the line of every mapping and list item.

Schema errors must say ``codegen/field_table.yaml:123``. The loader is the legacy configs' one
(:mod:`hyper_parallel.utils.yaml_lines`: LibYAML when available, the YAML 1.2 core schema,
merge keys, duplicate keys are errors, bounded alias expansion), in its strict mode: keys must
be strings, and a plain scalar that YAML 1.1 would read differently is an error too (``off``
must be quoted: it is a legal string value in the table, e.g. an activation-checkpoint mode;
``010`` is ten in YAML 1.2 but eight in YAML 1.1).
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.utils.yaml_lines import (
    INVALID,
    LDict,
    LList,
    YamlSyntaxError,
    load_nodes,
    plain,
)

__all__ = ["INVALID", "LDict", "LList", "load", "plain"]


def load(text: str, source: str, problems: list[str] | None = None) -> Any:
    """The document as :class:`LDict` / :class:`LList` / scalars.

    A text that cannot be loaded at all (not YAML, empty, too large) raises
    :class:`CodegenError`. The other problems (duplicate keys, YAML 1.1 spellings, ...) are
    appended to ``problems`` as ``source:line: message`` when it is given, so that the caller
    reports them with its own (their values load as :data:`INVALID`); without it they raise
    one :class:`CodegenError` listing them all.
    """
    try:
        data, found = load_nodes(text, string_keys=True, strict_yaml11=True)
    except YamlSyntaxError as exc:
        where = f"{source}:{exc.line}" if exc.line else source
        message = str(exc)
        if message.startswith("invalid YAML: "):
            message = "not valid YAML: " + message[len("invalid YAML: "):]
        raise CodegenError(f"{where}: {message}") from None
    if data is None:
        raise CodegenError(f"{source}: the file is empty")
    messages = [f"{source}:{p.line}: {p.message}" for p in found]
    if problems is not None:
        problems.extend(messages)
    elif messages:
        raise CodegenError(messages)
    return data
