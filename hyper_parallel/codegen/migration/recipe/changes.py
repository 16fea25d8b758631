"""The assignments of a converted recipe: where a config differs from the one it starts from.

:func:`field_changes` walks two ``HyperTrainer.Config`` trees in field order -- the order of
``HyperTrainer.Config``'s fields, then of each section's -- and returns one :class:`Change` per
leaf that differs (dict entries one by one, so a recipe sets ``config_overrides["x"]`` rather
than the whole dict when it can); :func:`statement` writes one as Python. The fleet planner
compares changes by :func:`item_key` and replays them with :func:`apply_changes`.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

from hyper_parallel.codegen.migration import pyliteral


@dataclass(frozen=True)
class Change:
    """``config<path> = value`` (or ``del config<path>`` when ``delete``); ``path`` holds
    ``("attr", name)`` and ``("key", dict key)`` steps."""

    path: tuple[tuple[str, Any], ...]
    value: Any = None
    delete: bool = False

    @property
    def dotted(self) -> str:
        """The path as the new tree's field name, dict keys joined with dots."""
        return ".".join(str(step) for _, step in self.path)

    @property
    def attr_path(self) -> str:
        """The dataclass part of the path (no dict keys)."""
        return ".".join(step for kind, step in self.path if kind == "attr")

    @property
    def dict_keys(self) -> tuple[Any, ...]:
        return tuple(step for kind, step in self.path if kind == "key")


def same(a: Any, b: Any) -> bool:
    """Equal and of the same type (``1 == 1.0 == True`` are three different settings)."""
    return type(a) is type(b) and a == b


def field_changes(base: Any, target: Any, path: tuple = ()) -> list[Change]:
    """The assignments that turn ``base`` into ``target``, in field order."""
    if dataclasses.is_dataclass(target) and type(base) is type(target):
        changes = []
        for f in dataclasses.fields(target):
            changes += field_changes(getattr(base, f.name), getattr(target, f.name),
                                     path + (("attr", f.name),))
        return changes
    if isinstance(base, dict) and isinstance(target, dict) and path:
        changes = [Change(path + (("key", k),), v) for k, v in target.items()
                   if k not in base or not same(base[k], v)]
        changes += [Change(path + (("key", k),), delete=True) for k in base if k not in target]
        return changes
    return [] if same(base, target) else [Change(path, target)]


def statement(change: Change, imports: set[tuple[str, str]]) -> str:
    """``config.a.b = <literal>`` (or ``del config.a["k"]``); adds the imports the value needs
    to ``imports``."""
    target = "config"
    for kind, step in change.path:
        if kind == "attr":
            target += f".{step}"
        else:
            target += f"[{pyliteral.literal(step, change.dotted + ' (key)').text}]"
    if change.delete:
        return f"del {target}"
    expression = pyliteral.literal(change.value, change.dotted)
    imports |= expression.imports
    return f"{target} = {expression.text}"


def item_key(change: Change) -> tuple:
    """A hashable stand-in for ``change``: two changes have the same key when they set the same
    path to the same value (:func:`same`: the same type and an equal value), so that they are
    the same line."""
    return (change.path, change.delete, type(change.value).__qualname__, repr(change.value))


def apply_changes(config: Any, changes: list[Change]) -> Any:
    """A copy of ``config`` with ``changes`` made (the model spec is shared, not copied)."""
    spec = getattr(config, "model_spec", None)
    config = copy.deepcopy(config, {id(spec): spec} if spec is not None else None)
    for change in changes:
        node = config
        for kind, step in change.path[:-1]:
            node = getattr(node, step) if kind == "attr" else node[step]
        kind, step = change.path[-1]
        if change.delete:
            del node[step]
        elif kind == "attr":
            setattr(node, step, copy.deepcopy(change.value))
        else:
            node[step] = copy.deepcopy(change.value)
    return config


__all__ = ["Change", "apply_changes", "field_changes", "item_key", "same", "statement"]
