"""Custom tyro parsing rules for the new command line.

List and tuple fields (``list[str]``, ``tuple[str, ...]``, ``tuple[float, float]``, ...) are
written as one comma-separated token (``--compile.components model,loss``, ``--optimizer.betas
0.9,0.95``) instead of tyro's default space-separated ``nargs``: that is how torchtitan users
write lists, and it keeps every override a single shell word (which
:func:`hyper_parallel.config.overrides.normalize_overrides` relies on). ``dict[str, Any]`` fields
(``model.config_overrides``) are one YAML flow mapping.

The rules live in one module-level registry that :func:`install_tyro_rules` fills once;
``ConfigManager`` installs it before its first ``tyro.cli`` call and passes it explicitly.

``CLI_HIDDEN`` hides a field from the command line (``Annotated[ModelSpec | None,
tyro_rules.CLI_HIDDEN]``): it is ``tyro.conf.Suppress``, imported when the attribute is first
read -- which is when tyro resolves the (postponed) annotation -- so a config module that
writes it imports no tyro (about 0.1 s) until a command line is parsed. Without tyro it is a
plain string (``Annotated`` needs some metadata).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

_REGISTRY: Any = None


_SCALARS: dict[Any, Callable[[str], Any]] = {str: str, int: int, float: float}


def _scalar(kind: Any, text: str) -> Any:
    try:
        return _SCALARS[kind](text)
    except ValueError:
        raise ValueError(f"{text!r} is not {'an int' if kind is int else 'a number'}") from None


def _comma_list_rule(type_info: Any) -> Any:
    """``list[T]``, ``tuple[T, ...]`` and ``tuple[T1, ..., Tn]`` of ``str`` / ``int`` /
    ``float`` as one comma-separated token: ``--compile.components model,loss``,
    ``--optimizer.betas 0.9,0.95``. Parts are stripped and empty parts dropped (an empty
    token is an empty list); a fixed-length tuple needs exactly its number of parts.
    ``X | None`` fields reach this rule as ``X`` (tyro splits the union)."""
    from tyro.constructors import PrimitiveConstructorSpec

    tp = type_info.type
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and len(args) == 1 and args[0] in _SCALARS:
        kinds, variadic, build = (args[0],), True, list
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in _SCALARS:
        kinds, variadic, build = (args[0],), True, tuple
    elif origin is tuple and args and Ellipsis not in args and all(a in _SCALARS for a in args):
        kinds, variadic, build = tuple(args), False, tuple
    else:
        return None
    names = {str: "A", int: "INT", float: "FLOAT"}
    metavar = (f"{names[kinds[0]]},{names[kinds[0]]},..." if kinds[0] is not str else "A,B,C,...") \
        if variadic else ",".join(names[k] if k is not str else "STR" for k in kinds)

    def parse(tokens: list[str]) -> Any:
        parts = [part.strip() for part in tokens[0].split(",") if part.strip()]
        if not variadic and len(parts) != len(kinds):
            raise ValueError(f"expected {len(kinds)} comma-separated values ({metavar}), got "
                             f"{len(parts)} in {tokens[0]!r}")
        return build(_scalar(kinds[0] if variadic else kinds[i], part)
                     for i, part in enumerate(parts))

    def fits(value: Any) -> bool:
        if not isinstance(value, (list, tuple)) or (not variadic and len(value) != len(kinds)):
            return False
        for i, item in enumerate(value):
            kind = kinds[0] if variadic else kinds[i]
            if kind is float:
                if not isinstance(item, (int, float)) or isinstance(item, bool):
                    return False
            elif not isinstance(item, kind) or isinstance(item, bool):
                return False
        return True

    return PrimitiveConstructorSpec(
        nargs=1,
        metavar=metavar,
        instance_from_str=parse,
        is_instance=fits,
        str_from_instance=lambda value: [",".join(str(v) for v in value)],
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

        try:
            value = yaml.safe_load(args[0])
        except (yaml.YAMLError, RecursionError) as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or type(exc).__name__
            if mark is not None:
                problem += f" at column {mark.column + 1}"
            raise ValueError(f"not a YAML mapping ({problem}); write '{{key: value, ...}}'") from None
        if value is None or args[0] == "None":
            if optional:
                return None
            value = {}
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ValueError(f"expected a mapping such as '{{key: value}}', got {args[0]!r}")
        return value

    def render(value: dict | None) -> list[str]:
        from hyper_parallel.utils.yaml_lines import dump

        if value is None:
            return ["null"]
        return [dump(value, default_flow_style=True, sort_keys=False).strip()]

    return PrimitiveConstructorSpec(
        nargs=1,
        metavar="{KEY: VALUE, ...}",
        instance_from_str=parse,
        is_instance=lambda value: isinstance(value, dict) or (optional and value is None),
        str_from_instance=render,
    )


def __getattr__(name: str) -> Any:
    if name != "CLI_HIDDEN":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from tyro.conf import Suppress as hidden
    except ImportError:  # tyro is optional: only the --module command line needs it
        hidden = "hidden from the command line"
    globals()[name] = hidden  # later lookups skip this hook
    return hidden


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
