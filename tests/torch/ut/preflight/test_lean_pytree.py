"""Preflight's walks of an operator's arguments and outputs
(:mod:`hyper_parallel.preflight.lean_pytree`) are torch's pytree's: over trees of every kind of
node torch flattens (tuples, lists, dicts, namedtuples, ``torch.Size``, ``OrderedDict``,
``defaultdict``, ``deque``, a subclass of tuple) and of leaves (tensors, real and fake, scalars,
None, dtypes, strings, a list subclass), the same leaves, by identity and in the same order;
``map_tensors`` calls its function on the same tensors in the same order and rebuilds the same
tree; and the trackers' ``tree_map_only`` is replaced only while the patches hold."""

from __future__ import annotations

import collections
import dataclasses

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils import _pytree as pytree

from hyper_parallel.preflight import lean_pytree
from hyper_parallel.preflight.fake_world import Patches

Pair = collections.namedtuple("Pair", "first second")


class Row(tuple):
    """A tuple subclass pytree does not register: a leaf to torch."""


class Items(list):
    """A list subclass pytree does not register: a leaf to torch."""


@dataclasses.dataclass(frozen=True)
class Mapped:
    """What the mapped function made of the tensor ``of`` (its ``id``): a leaf."""

    of: int


_MODE = torch._subclasses.fake_tensor.FakeTensorMode()
with _MODE:
    _FAKE = torch.empty(2, 3)
LEAVES = st.sampled_from([torch.zeros(2), torch.ones(3, dtype=torch.bfloat16), _FAKE, 0, 1,
                          2.5, True, None, "mean", torch.float32, torch.device("cpu"),
                          Row((1, 2)), Items([3])])


def _extend(children):
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.sampled_from("abcde"), children, max_size=3),
        st.tuples(children, children).map(lambda t: Pair(*t)),
        st.lists(st.integers(0, 9), max_size=3).map(torch.Size),
        st.dictionaries(st.sampled_from("xyz"), children, max_size=3).map(
            collections.OrderedDict),
        st.dictionaries(st.sampled_from("pq"), children, max_size=2).map(
            lambda d: collections.defaultdict(int, d)),
        st.lists(children, max_size=3).map(collections.deque),
    )


TREES = st.recursive(LEAVES, _extend, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(TREES)
def test_the_leaves_are_torchs_in_torchs_order(tree):
    ours, theirs = lean_pytree.leaves(tree), pytree.tree_leaves(tree)
    assert [id(x) for x in ours] == [id(x) for x in theirs]


@settings(max_examples=300, deadline=None)
@given(TREES)
def test_map_tensors_visits_and_rebuilds_as_torchs_tree_map_only(tree):
    seen: dict[str, list[int]] = {"ours": [], "theirs": []}

    def mapping(into):
        def fn(t):
            seen[into].append(id(t))
            return Mapped(id(t))
        return fn

    def identities(tree):
        return [x if isinstance(x, Mapped) else id(x) for x in pytree.tree_leaves(tree)]

    ours = lean_pytree.tree_map_only(torch.Tensor, mapping("ours"), tree)
    theirs = pytree.tree_map_only(torch.Tensor, mapping("theirs"), tree)
    assert seen["ours"] == seen["theirs"]
    assert type(ours) is type(theirs)
    assert pytree.tree_structure(ours) == pytree.tree_structure(theirs)
    assert identities(ours) == identities(theirs)


def test_other_types_and_leaf_tests_go_to_torch():
    """A type other than ``torch.Tensor`` or an ``is_leaf`` is torch's ``tree_map_only``."""
    tree = {"a": [1, 2.0, torch.zeros(1)], "b": (3,)}
    assert lean_pytree.tree_map_only(int, lambda v: v + 1, tree) == pytree.tree_map_only(
        int, lambda v: v + 1, tree)
    leaf_lists = lean_pytree.tree_map_only(
        list, len, tree, is_leaf=lambda node: isinstance(node, list))
    assert leaf_lists == {"a": 3, "b": (3,)}


def test_the_trackers_walk_leanly_only_while_patched():
    from torch.distributed._tools import fsdp2_mem_tracker, mem_tracker

    patches = Patches()
    lean_pytree.patch_trackers(patches)
    try:
        assert fsdp2_mem_tracker.tree_map_only is lean_pytree.tree_map_only
        assert mem_tracker.tree_map_only is lean_pytree.tree_map_only
    finally:
        patches.undo()
    assert fsdp2_mem_tracker.tree_map_only is pytree.tree_map_only
    assert mem_tracker.tree_map_only is pytree.tree_map_only
