"""Printing a config: as a plain dict, as YAML, and the ``--help`` list of every field."""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Sequence
from typing import Any

from hyper_parallel.utils.docstrings import field_docstrings
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.yaml_lines import dump

from .coerce import describe_type
from .load import USAGE, parse_args


def config_to_dict(config: Any) -> dict:
    """Plain nested dict of a config (tuples become lists), in field order."""

    def convert(value: Any) -> Any:
        if dataclasses.is_dataclass(value):
            return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return value

    return convert(config)


def dump_yaml(config: Any) -> str:
    """The config as YAML text (field order, no ``train.local_rank``)."""
    data = config_to_dict(config)
    data.get("train", {}).pop("local_rank", None)
    return dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def field_help(cls: type, prefix: str = "") -> list[str]:
    """One block per field: dotted path, type, default, docstring."""
    lines = []
    hints = typing.get_type_hints(cls)
    docs = field_docstrings(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(tp):
            lines.append(f"\n[{path}] {docs.get(f.name, '')}")
            lines.extend(field_help(tp, path + "."))
            continue
        default = getattr(defaults, f.name)
        lines.append(f"  --{path} ({describe_type(tp)}, default {default!r})")
        for doc_line in docs.get(f.name, "").splitlines():
            lines.append(f"      {doc_line}")
    return lines


def main(root_class: type, argv: Sequence[str] | None = None) -> int:
    """``python -m hyper_parallel.trainer.config old.yaml [overrides]``: print the resolved
    ``root_class``."""
    args = list(sys.argv[1:] if argv is None else argv)
    prog = "python -m hyper_parallel.trainer.config"
    if not args or args[0] in ("-h", "--help"):
        print(USAGE.format(prog=prog))
        if args:
            print("\nFields (YAML key = dotted path):")
            print("\n".join(field_help(root_class)))
        return 0 if args else 2
    try:
        config = parse_args(root_class, args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dump_yaml(config), end="")
    return 0
