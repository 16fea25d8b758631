"""YAML loading that remembers where every key stands.

Error messages must point at ``file:line``, which ``yaml.safe_load`` forgets. This loader composes
the node graph with PyYAML's safe loader and converts it into plain Python values while recording
the line of every mapping key (by dotted path), and rejects duplicate keys (PyYAML silently keeps
the last one).

Booleans follow YAML 1.2: only ``true`` / ``false`` (any case) are booleans. YAML 1.1 also turns
``on``, ``off``, ``yes``, ``no`` into booleans, which breaks string fields such as
``activation_checkpoint: off``; here they stay strings, and boolean fields accept them as aliases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


class YamlSyntaxError(ValueError):
    """The text is not valid YAML, or has a duplicate key; ``line`` is 1-based when known."""

    def __init__(self, message: str, line: int | None):
        self.line = line
        super().__init__(message)


@dataclass
class LocatedYaml:
    """A loaded document plus the 1-based line of each mapping key, by key path tuple."""

    data: Any
    lines: dict[tuple, int] = field(default_factory=dict)


def load_yaml_with_lines(text: str) -> LocatedYaml:
    """Load one YAML document; an empty document loads as ``None``."""
    loader = None
    try:
        # The reader validates characters as soon as the loader is constructed.
        loader = _Loader(text)
        node = loader.get_single_node()
        located = LocatedYaml(None)
        if node is not None:
            located.data = _convert(loader, node, (), located.lines)
        return located
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlSyntaxError(f"invalid YAML: {exc.problem or exc}", line) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(f"invalid YAML: {exc}", None) from None
    finally:
        if loader is not None:
            loader.dispose()


def parse_scalar(text: str) -> Any:
    """Parse a command-line value the way a YAML value is parsed (flow lists and maps too)."""
    if text == "":
        return ""
    try:
        return load_yaml_with_lines(text).data
    except YamlSyntaxError:
        return text  # not YAML: the literal string, typed by the field later


def _convert(loader: _Loader, node: yaml.Node, path: tuple, lines: dict[tuple, int]) -> Any:
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolve YAML merge keys (<<)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            try:
                key = loader.construct_object(key_node, deep=True)
            except yaml.YAMLError as exc:
                raise YamlSyntaxError(f"invalid key: {exc}", key_node.start_mark.line + 1) from None
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise YamlSyntaxError(
                    f"mapping keys must be plain scalars, got {type(key).__name__}",
                    key_node.start_mark.line + 1,
                )
            line = key_node.start_mark.line + 1
            if key in result:
                raise YamlSyntaxError(
                    f"duplicate key {key!r} (first at line {lines.get(path + (key,))})", line
                )
            lines[path + (key,)] = line
            result[key] = _convert(loader, value_node, path + (key,), lines)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(loader, item, path + (i,), lines) for i, item in enumerate(node.value)]
    try:
        return loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        raise YamlSyntaxError(f"invalid value: {exc}", node.start_mark.line + 1) from None
