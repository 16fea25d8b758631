"""Custom tyro parsing rules for the new command line.

``list[str]`` fields are written as one comma-separated token (``--compile.components
model,loss``) instead of tyro's default space-separated ``nargs``: that is how torchtitan users
write them, and it keeps an override a single shell word. ``dict[str, Any]`` fields
(``model.config_overrides``) are one YAML flow mapping.

The rules live in one module-level registry that :func:`install_tyro_rules` fills once;
``ConfigManager`` installs it before its first ``tyro.cli`` call and passes it explicitly.
"""

from __future__ import annotations

import typing
from typing import Any

_REGISTRY: Any = None


def _comma_list_rule(type_info: Any) -> Any:
    from tyro.constructors import PrimitiveConstructorSpec

    if typing.get_origin(type_info.type) is not list or typing.get_args(type_info.type) != (str,):
        return None
    return PrimitiveConstructorSpec(
        nargs=1,
        metavar="A,B,C,...",
        instance_from_str=lambda args: [part.strip() for part in args[0].split(",") if part.strip()],
        is_instance=lambda value: isinstance(value, list) and all(isinstance(v, str) for v in value),
        str_from_instance=lambda value: [",".join(value)],
    )


def _yaml_mapping_rule(type_info: Any) -> Any:
    """``dict[str, Any]`` as one YAML/JSON flow mapping: ``--model.config_overrides
    '{flavor: debugmodel, num_hidden_layers: 4}'`` (tyro would otherwise expand it into
    subcommands, which cannot express arbitrary keys)."""
    import types

    from tyro.constructors import PrimitiveConstructorSpec

    tp = type_info.type
    optional = False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(members) == 1 and len(typing.get_args(tp)) == 2
        tp = members[0] if optional else tp
    if typing.get_origin(tp) is not dict or typing.get_args(tp) != (str, Any):
        return None

    def parse(args: list[str]) -> dict | None:
        import yaml

        value = yaml.safe_load(args[0])
        if value is None or args[0] == "None":
            if optional:
                return None
            value = {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ValueError(f"expected a mapping such as '{{key: value}}', got {args[0]!r}")
        return value

    def render(value: dict | None) -> list[str]:
        import yaml

        if value is None:
            return ["null"]
        return [yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()]

    return PrimitiveConstructorSpec(
        nargs=1,
        metavar="{KEY: VALUE, ...}",
        instance_from_str=parse,
        is_instance=lambda value: isinstance(value, dict) or (optional and value is None),
        str_from_instance=render,
    )


def install_tyro_rules() -> Any:
    """Create (once) and return the registry holding hyper_parallel's tyro rules."""
    global _REGISTRY
    if _REGISTRY is None:
        from tyro.constructors import ConstructorRegistry

        registry = ConstructorRegistry()
        registry.primitive_rule(_comma_list_rule)
        registry.primitive_rule(_yaml_mapping_rule)
        _REGISTRY = registry
    return _REGISTRY
