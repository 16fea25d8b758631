"""Read attribute docstrings of dataclass fields.

Fields document themselves with a string literal right after the annotation (the convention tyro
and Sphinx understand). Python drops those strings at run time, so this module recovers them from
the class source for ``--help`` and the reference docs: :func:`field_docstrings` from a class,
:func:`attribute_docstrings` from a class body already parsed (the generator reads component
Configs from source without importing them).
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import textwrap


def attribute_docstrings(body: list[ast.stmt]) -> dict[str, str]:
    """``{name: docstring}`` for the annotated attributes of a class body (its ``ast``
    statements) that are followed by a string literal."""
    docs: dict[str, str] = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


@functools.cache
def field_docstrings(cls: type) -> dict[str, str]:
    """``{field_name: docstring}`` for the annotated attributes of ``cls`` that have one."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    return attribute_docstrings(ast.parse(source).body[0].body)  # type: ignore[attr-defined]
