"""Load the field table with the line of every mapping and list item.

Schema errors must say ``codegen/field_table.yaml:123``, so the YAML is composed into nodes
(LibYAML when available: loading is on the ``make codegen`` critical path) and converted into
:class:`LDict` / :class:`LList` values that remember their lines. Duplicate keys are errors, and
so are YAML 1.1 booleans spelled other than ``true`` / ``false`` (``off`` must be quoted: it is a
legal string value in the table, e.g. an activation-checkpoint mode).
"""

from __future__ import annotations

from typing import Any

import yaml

from hyper_parallel.codegen.errors import CodegenError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOOL_TAG = "tag:yaml.org,2002:bool"


class LDict(dict):
    """A mapping with ``line`` (1-based, of its first key) and ``key_lines``."""

    line: int = 0
    key_lines: dict[str, int]


class LList(list):
    """A sequence with ``line`` and ``item_lines``."""

    line: int = 0
    item_lines: list[int]


def load(text: str, source: str) -> Any:
    """The document as :class:`LDict` / :class:`LList` / scalars."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise CodegenError(f"{where}: not valid YAML: {exc}") from None
    if node is None:
        raise CodegenError(f"{source}: the table is empty")
    constructor = yaml.SafeLoader("")
    return _convert(node, source, constructor)


def plain(value: Any) -> Any:
    """An :class:`LDict` / :class:`LList` tree as plain ``dict`` / ``list`` (values compare and
    print like what ``yaml.safe_load`` returns)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _convert(node: yaml.Node, source: str, constructor: yaml.SafeLoader) -> Any:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = LDict()
        out.line = line
        out.key_lines = {}
        for key_node, value_node in node.value:
            key = _convert(key_node, source, constructor)
            if not isinstance(key, str):
                raise CodegenError(f"{source}:{key_node.start_mark.line + 1}: keys must be strings")
            if key in out:
                raise CodegenError(
                    f"{source}:{key_node.start_mark.line + 1}: duplicate key {key!r} (first at "
                    f"line {out.key_lines[key]})"
                )
            out[key] = _convert(value_node, source, constructor)
            out.key_lines[key] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        out_list = LList(_convert(item, source, constructor) for item in node.value)
        out_list.line = line
        out_list.item_lines = [item.start_mark.line + 1 for item in node.value]
        return out_list
    if node.tag == _BOOL_TAG and node.value.lower() not in ("true", "false"):
        raise CodegenError(
            f"{source}:{line}: {node.value!r} is a YAML 1.1 boolean; write true / false, or quote "
            f"it ('{node.value}') for the string"
        )
    return constructor.construct_object(node, deep=True)
