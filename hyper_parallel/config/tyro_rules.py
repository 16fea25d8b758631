"""Custom tyro parsing rules for the new command line.

``list[str]`` fields are written as one comma-separated token (``--compile.components
model,loss``) instead of tyro's default space-separated ``nargs``: that is how torchtitan users
write them, and it keeps an override a single shell word.

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


def install_tyro_rules() -> Any:
    """Create (once) and return the registry holding hyper_parallel's tyro rules."""
    global _REGISTRY
    if _REGISTRY is None:
        from tyro.constructors import ConstructorRegistry

        registry = ConstructorRegistry()
        registry.primitive_rule(_comma_list_rule)
        _REGISTRY = registry
    return _REGISTRY
