"""The keys of a module-level dict literal, read from source (no import).

Flavor tables (``FLAVORS`` of a model package) are read this way by the legacy parser and by
the code generator, which must not import the model packages (they import torch). A table is
a dict literal, optionally extended by ``NAME.update({...})`` literals after it (the image-text
flavors are added so): the keys of both, in order.
"""

from __future__ import annotations

import ast


def dict_literal_keys(tree: ast.Module, name: str) -> tuple[str, ...] | None:
    """The keys of the module-level dict literal ``name`` of ``tree`` and of the
    ``name.update({...})`` literals that follow it, in order; None when ``name`` is not
    assigned a dict literal at module level. A key that is not a string literal is a
    ``ValueError``."""
    keys: list[str] | None = None
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            keys = _keys(value, name) if isinstance(value, ast.Dict) else None
            continue
        call = value if isinstance(node, ast.Expr) else None
        if (
            keys is not None
            and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "update"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == name
            and len(call.args) == 1
            and isinstance(call.args[0], ast.Dict)
        ):
            keys += _keys(call.args[0], name)
    return None if keys is None else tuple(keys)


def _keys(node: ast.Dict, name: str) -> list[str]:
    out = []
    for key in node.keys:
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise ValueError(f"the keys of {name} must be string literals")
        out.append(key.value)
    return out
