"""The leaves of an operator's arguments and outputs, walked in fewer Python steps: the same
leaves, in the same order.

A simulated step walks every operator's arguments and outputs three or four times: torch's
memory trackers map their tensors (``tree_map_only(torch.Tensor, ...)``, to file each new
storage) and the work recorder lists their leaves (:mod:`~hyper_parallel.preflight.work`).
torch's pytree asks of every node and leaf what kind of node it is (a registry lookup, a
namedtuple test, a leaf test), which cost about a tenth of a 9B role's simulation. An operator's
arguments are nearly always tuples and lists of tensors and scalars, so :func:`leaves` and
:func:`map_tensors` walk exact tuples, lists and dicts themselves and hand every other node
(a namedtuple, ``torch.Size``, an ``OrderedDict``, any type registered with pytree, any
subclass of tuple) to torch's own functions, where it is flattened as torch flattens it. A
value of any other type is a leaf, as in torch's pytree, whose leaves are the values whose
type is not a registered node.

``tests/torch/ut/preflight/test_lean_pytree.py`` holds both to torch's over nested trees of
every kind of node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

#: torch's registry of node types (the live dict: a type registered later is seen).
_NODES = pytree.SUPPORTED_NODES


def leaves(tree: Any) -> list[Any]:
    """``torch.utils._pytree.tree_leaves(tree)``."""
    out: list[Any] = []
    _leaves_into(tree, out)
    return out


def _leaves_into(tree: Any, out: list[Any]) -> None:
    kind = type(tree)
    if kind is tuple or kind is list:
        for item in tree:
            _leaves_into(item, out)
    elif kind is dict:
        for item in tree.values():
            _leaves_into(item, out)
    elif kind in _NODES or isinstance(tree, tuple):  # any other node: torch flattens it
        out.extend(pytree.tree_leaves(tree))
    else:
        out.append(tree)


def map_tensors(func: Callable[[torch.Tensor], Any], tree: Any) -> Any:
    """``torch.utils._pytree.tree_map_only(torch.Tensor, func, tree)``: ``func`` called on each
    tensor leaf in the order of :func:`leaves`, and the tree rebuilt with its results."""
    kind = type(tree)
    if kind is tuple or kind is list:
        return kind([map_tensors(func, item) for item in tree])
    if kind is dict:
        return {key: map_tensors(func, item) for key, item in tree.items()}
    if kind in _NODES or isinstance(tree, tuple):
        return pytree.tree_map_only(torch.Tensor, func, tree)
    return func(tree) if isinstance(tree, torch.Tensor) else tree


def tree_map_only(type_or_types: Any, func: Callable[[Any], Any], tree: Any,
                  is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """torch's ``tree_map_only``, by :func:`map_tensors` when it maps tensors (the memory
    trackers' one use), else torch's own."""
    if type_or_types is torch.Tensor and is_leaf is None:
        return map_tensors(func, tree)
    return pytree.tree_map_only(type_or_types, func, tree, is_leaf=is_leaf)


def patch_trackers(patches: Any) -> None:
    """torch's memory trackers map each operator's tensors with :func:`tree_map_only` (a
    :class:`~hyper_parallel.preflight.fake_world.Patches`' replacements: undone with it)."""
    from torch.distributed._tools import fsdp2_mem_tracker, mem_tracker

    for module in (fsdp2_mem_tracker, mem_tracker):
        if getattr(module, "tree_map_only", None) is pytree.tree_map_only:
            patches.set(module, "tree_map_only", tree_map_only)


__all__ = ["leaves", "map_tensors", "patch_trackers", "tree_map_only"]
