"""Command-line overrides: ``--a.b.c=value`` / ``--a.b.c value`` applied to the raw YAML tree.

Values are read as YAML (``[0.9,0.95]``, ``{num_hidden_layers: 4}``, ``null``) by the caller and
coerced by the field's declared type when the tree is built. An override inside a dict field
(``--model.config_overrides.head_dim=64``) merges into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hyper_parallel.utils.yaml_lines import INVALID

from .problems import _Context, _dotted, _shown


def _split_overrides(tokens: Sequence[str], ctx: _Context) -> list[tuple[str, str, str]]:
    """``[(dotted_key, raw_value, as_written)]`` from ``--a.b=c`` / ``--a.b c`` tokens; a
    malformed token is recorded in ``ctx`` and skipped."""
    overrides = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--") or token == "--":
            ctx.add(
                f"unexpected argument {token!r}: overrides are written --section.field=value "
                "(only one YAML file may be given)",
                location="command line",
            )
            continue
        body = token[2:]
        if "=" in body:
            key, value = body.split("=", 1)
            written = token
        else:
            if i >= len(tokens) or tokens[i].startswith("--"):
                ctx.add(f"override {token!r} has no value; write {token}=VALUE",
                        location="command line")
                continue
            key, value = body, tokens[i]
            written = f"{token} {value}"
            i += 1
        if not key or any(not part for part in key.split(".")):
            ctx.add(f"malformed override {token!r}", location="command line")
            continue
        overrides.append((key, value, written))
    return overrides


def _apply_override(raw: dict, key: str, value: Any, written: str, ctx: _Context) -> None:
    parts = tuple(key.split("."))
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif child is INVALID:
            return  # the YAML value is reported already
        elif not isinstance(child, dict):
            prefix = parts[: depth + 1]
            ctx.add(
                f"cannot apply {written}: {_dotted(prefix)} is {_shown(child)}, not a mapping",
                prefix,
            )
            return
        node = child
    last = parts[-1]
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        _deep_merge(node[last], value)
    else:
        node[last] = value
    ctx.cli[parts] = written


def _deep_merge(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value
