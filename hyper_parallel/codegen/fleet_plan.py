"""The fleet planner: which shared functions a fleet's recipes call, as a pure function.

Each file of a group (the files on one baseline) is given as the set of its *items* -- hashable
stand-ins for the assignments it needs on top of that baseline (``recipe_changes.item_key``).
:func:`plan_hierarchy` builds a tree over them: shared functions (*families*) that set what the
files below them agree on beyond what they call, and files that serve as a family themselves
when their items are exactly what several others share. Families are formed greedily while
they save lines (:data:`FAMILY_COST`); the result, a :class:`Hierarchy`, depends on the item
sets alone.
"""

from __future__ import annotations

from dataclasses import dataclass

#: What a new shared function costs the planner, in lines, besides its assignments: it is only
#: written when it saves more repeated lines than that. It is less than the module lines a
#: function takes (``def``, docstring, first line, ``return``, blank lines) because a line
#: repeated across recipes is worse than one more function: with 2, two files get a family for
#: 3 shared lines, three files for 2, four or more for 1.
FAMILY_COST = 2


@dataclass(frozen=True)
class Hierarchy:
    """The planner's tree over one group of files (one baseline): node ``i`` for ``i < files``
    is the ``i``-th file, the nodes after them the new shared functions (*families*), in the
    order they were formed. ``parent[node]`` is the node it calls (None: the baseline); a file
    can be a parent (the others call its recipe); every node sets ``items[node] -
    items[parent]``."""

    files: int
    items: tuple[frozenset, ...]
    parent: tuple[int | None, ...]

    @property
    def families(self) -> range:
        return range(self.files, len(self.items))

    def inherited(self, node: int) -> frozenset:
        """What the node starts from: its parent's items (none on the baseline)."""
        parent = self.parent[node]
        return frozenset() if parent is None else self.items[parent]

    def lines(self, node: int) -> frozenset:
        """The items the node sets itself."""
        return self.items[node] - self.inherited(node)

    def children(self, node: int) -> list[int]:
        return [n for n, p in enumerate(self.parent) if p == node]

    def ancestors(self, node: int) -> list[int]:
        """The nodes above ``node``, nearest first."""
        found = []
        while self.parent[node] is not None:
            node = self.parent[node]
            found.append(node)
        return found

    def below(self, node: int) -> list[int]:
        """The files that call ``node``, directly or through other nodes (itself when a file),
        in file order."""
        return sorted(n for n in range(self.files) if n == node or node in self.ancestors(n))

    def cost(self, family_cost: int = FAMILY_COST) -> int:
        """The assignments written, plus ``family_cost`` per family."""
        return sum(len(self.lines(n)) for n in range(len(self.items))) + \
            family_cost * (len(self.items) - self.files)


def plan_hierarchy(item_sets: list[frozenset] | list[set], family_cost: int = FAMILY_COST
                   ) -> Hierarchy:
    """The tree of shared functions over files on one baseline, each given as the set of its
    items (hashable changes relative to that baseline), in file order.

    Deterministic greedy agglomeration. A *scope* is the baseline or a node with two or more
    children; among the children of a scope, for each pair ``a``, ``b``: ``T = items(a) &
    items(b)``, ``F`` = the children holding all of ``T`` (then ``T`` is exactly what they
    share). Hanging ``F`` under one node with items ``T`` -- a member whose items are ``T`` (its
    recipe serves, no new function) or a new family -- saves ``(|F| - 1) * |T - items(scope)|``
    lines, less ``family_cost`` for a new family. The best positive saving is taken (ties: the
    larger ``F``, the larger ``T``, the earlier files), until none is left. Families thus form
    above existing ones (the baseline's scope) and inside them (a family's children)."""
    items: list[frozenset] = [frozenset(s) for s in item_sets]
    files = len(items)
    parent: list[int | None] = [None] * files
    first = list(range(files))  # the earliest file at or below each node: the order
    while True:
        children: dict[int | None, list[int]] = {}
        for node in sorted(range(len(items)), key=lambda n: first[n]):
            children.setdefault(parent[node], []).append(node)
        best: tuple | None = None
        for scope, members in children.items():
            above = frozenset() if scope is None else items[scope]
            seen: set[tuple[int, ...]] = set()
            for position, a in enumerate(members):
                for b in members[position + 1:]:
                    shared = items[a] & items[b]
                    if not shared - above:
                        continue
                    group = tuple(m for m in members if items[m] >= shared)
                    if group in seen:
                        continue
                    seen.add(group)
                    shared = frozenset.intersection(*(items[m] for m in group))
                    server = next((m for m in group if items[m] == shared), None)
                    saving = (len(group) - 1) * len(shared - above) - (
                        0 if server is not None else family_cost)
                    if saving <= 0:
                        continue
                    key = (-saving, -len(group), -len(shared), [first[m] for m in group])
                    if best is None or key < best[0]:
                        best = (key, scope, group, shared, server)
        if best is None:
            break
        _, scope, group, shared, server = best
        if server is None:
            server = len(items)
            items.append(shared)
            parent.append(scope)
            first.append(min(first[m] for m in group))
        for m in group:
            if m != server:
                parent[m] = server
    return Hierarchy(files, tuple(items), tuple(parent))


__all__ = ["FAMILY_COST", "Hierarchy", "plan_hierarchy"]
