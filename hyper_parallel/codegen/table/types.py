"""Type annotations as canonical strings, and value checks against them.

Three sources state types: the table (text), the component Configs (annotation source, read
without importing them) and the legacy schema (runtime ``typing`` objects). All three are turned
into one canonical spelling so they can be compared: ``Optional[X]`` is ``X | None``, ``None``
goes last in a union, ``typing.List`` is ``list``, Literal strings use double quotes::

    canonical("Optional[str]") == canonical("None | str") == "str | None"

The supported vocabulary is what configs use: ``int``, ``float``, ``bool``, ``str``, ``Any``,
``None``, class names, ``list[X]``, ``tuple[X, Y]``, ``tuple[X, ...]``, ``dict[K, V]``,
``Literal[...]`` and unions.
"""

from __future__ import annotations

import ast
import functools
import json
import types as _pytypes
import typing
from typing import Any

_ALIASES = {"List": "list", "Tuple": "tuple", "Dict": "dict"}


class TypeSyntaxError(ValueError):
    """The text is not a supported annotation."""


# ---------------------------------------------------------------------------------------------
# canonical spelling
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def canonical(text: str) -> str:
    """The canonical spelling of the annotation ``text`` (``TypeSyntaxError`` if unsupported);
    remembered, as the same few spellings come back for every field."""
    try:
        node = ast.parse(str(text).strip(), mode="eval").body
    except SyntaxError as exc:
        raise TypeSyntaxError(f"{text!r} is not a Python annotation: {exc.msg}") from None
    return _render(node, text)


def _union_members(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union_members(node.left) + _union_members(node.right)
    return [node]


def _join_union(members: list[str]) -> str:
    unique: list[str] = []
    for m in members:
        for part in m.split(" | ") if not m.startswith("Literal[") else [m]:
            if part not in unique:
                unique.append(part)
    rest = [m for m in unique if m != "None"]
    return " | ".join(rest + (["None"] if "None" in unique else []))


def _render(node: ast.AST, text: str) -> str:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _join_union([_render(m, text) for m in _union_members(node)])
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return "..."
    if isinstance(node, ast.Name):
        return _ALIASES.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        # typing.Any, BaseLoss.Config, ...: keep the dotted name, minus a typing. prefix.
        dotted = ast.unparse(node)
        dotted = dotted.removeprefix("typing.")
        return _ALIASES.get(dotted, dotted)
    if isinstance(node, ast.Subscript):
        head = _render(node.value, text)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return _join_union([_render(args[0], text), "None"])
        if head == "Union":
            return _join_union([_render(a, text) for a in args])
        if head == "Literal":
            values = []
            for a in args:
                if not isinstance(a, ast.Constant):
                    raise TypeSyntaxError(f"{text!r}: Literal values must be constants")
                values.append(_literal_value(a.value))
            return f"Literal[{', '.join(values)}]"
        if head == "Annotated":
            return _render(args[0], text)
        return f"{head}[{', '.join(_render(a, text) for a in args)}]"
    raise TypeSyntaxError(f"{text!r}: unsupported annotation element {ast.unparse(node)!r}")


def _literal_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def canonical_runtime(tp: Any) -> str:
    """The canonical spelling of a runtime ``typing`` object (the legacy schema's hints)."""
    if tp is type(None) or tp is None:
        return "None"
    if tp is Any:
        return "Any"
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, _pytypes.UnionType):
        return _join_union([canonical_runtime(a) for a in args])
    if origin is typing.Literal:
        return f"Literal[{', '.join(_literal_value(a) for a in args)}]"
    if origin is typing.Annotated:
        return canonical_runtime(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        rendered = ", ".join("..." if a is Ellipsis else canonical_runtime(a) for a in args)
        return f"{name}[{rendered}]" if args else name
    return getattr(tp, "__qualname__", getattr(tp, "__name__", str(tp)))


# ---------------------------------------------------------------------------------------------
# structure
# ---------------------------------------------------------------------------------------------


def split_optional(type_text: str) -> tuple[str, bool]:
    """``("int", True)`` for ``int | None``; ``(type_text, False)`` when None is not a member."""
    node = ast.parse(type_text, mode="eval").body
    members = [ast.unparse(m) for m in _union_members(node)]
    if len(members) > 1 and "None" in members:
        return canonical(" | ".join(m for m in members if m != "None")), True
    return type_text, False


def literal_values(type_text: str) -> tuple[Any, ...] | None:
    """The values of a ``Literal[...]`` (optional or not), else None."""
    base, _ = split_optional(type_text)
    if not base.startswith("Literal["):
        return None
    node = ast.parse(base, mode="eval").body
    args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return tuple(a.value for a in args)


def _parts(type_text: str) -> tuple[str, list[str]]:
    node = ast.parse(type_text, mode="eval").body
    if isinstance(node, ast.Subscript):
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        return ast.unparse(node.value), [ast.unparse(a) for a in args]
    return ast.unparse(node), []


def matches(value: Any, type_text: str) -> bool:
    """Whether ``value`` is an instance of the canonical type ``type_text``."""
    node = ast.parse(type_text, mode="eval").body
    members = _union_members(node)
    if len(members) > 1:
        return any(matches(value, ast.unparse(m)) for m in members)
    head, args = _parts(type_text)
    if head == "None":
        return value is None
    if head == "Any":
        return True
    if head == "bool":
        return isinstance(value, bool)
    if head == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if head == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if head == "str":
        return isinstance(value, str)
    if head == "Literal":
        return any(type(value) is type(v) and value == v for v in literal_values(type_text) or ())
    if head == "list":
        return isinstance(value, list) and all(matches(v, args[0]) for v in value)
    if head == "tuple":
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] == "...":
            return all(matches(v, args[0]) for v in value)
        return len(value) == len(args) and all(matches(v, a) for v, a in zip(value, args))
    if head == "dict":
        return isinstance(value, dict) and all(
            matches(k, args[0]) and matches(v, args[1]) for k, v in value.items()
        )
    # A class name (ModelSpec, a Config): only None can be stated in the table.
    return False


def from_yaml(value: Any, type_text: str) -> Any:
    """A YAML value as the declared type: sequences become tuples for tuple types, ints become
    floats for float types (``1`` for a ``float`` field is ``1.0``)."""
    if value is None:
        return None
    base, _ = split_optional(type_text)
    head, args = _parts(base)
    if head == "tuple" and isinstance(value, list):
        item_types = [args[0]] * len(value) if len(args) == 2 and args[1] == "..." else args
        return tuple(from_yaml(v, t) for v, t in zip(value, item_types)) if len(
            item_types) == len(value) else tuple(value)
    if head == "list" and isinstance(value, list):
        return [from_yaml(v, args[0]) for v in value]
    if head == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def mutable(type_text: str) -> bool:
    """Whether values of this type are mutable containers (copied when converted)."""
    return any(f"{c}[" in type_text for c in ("list", "dict"))


def rename_compatible(legacy: str, new: str) -> bool:
    """A rename may copy a legacy value of type ``legacy`` into a field of type ``new``: the
    same type, or a legacy ``str`` narrowed to a ``Literal`` (same optionality)."""
    if legacy == new:
        return True
    legacy_base, legacy_opt = split_optional(legacy)
    new_base, new_opt = split_optional(new)
    return legacy_opt == new_opt and legacy_base == "str" and new_base.startswith("Literal[")


def python_literal(value: Any) -> str:
    """Source text of a default value (``repr``; floats keep their shortest round-trip form)."""
    return repr(value)
