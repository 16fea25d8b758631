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

import heapq
import itertools
from collections import Counter, defaultdict
from collections.abc import Hashable
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
        return self.below_each()[node]

    def below_each(self) -> list[list[int]]:
        """:meth:`below` of every node, in one walk up from each file (not one per node)."""
        found: list[list[int]] = [[] for _ in self.items]
        for file in range(self.files):
            for node in [file, *self.ancestors(file)]:
                found[node].append(file)
        return found

    def cost(self, family_cost: int = FAMILY_COST) -> int:
        """The assignments written, plus ``family_cost`` per family."""
        return sum(len(self.lines(n)) for n in range(len(self.items))) + \
            family_cost * (len(self.items) - self.files)


class _Scope:
    """The members of one scope (the children of a node, or the files on the baseline) and the
    groups they could form.

    A candidate is what two members have in common beyond ``above`` (the items of the scope's
    node); its group, the members holding all of it. Every member holds the scope's ``core``
    (what all members held when it was built: a family added later holds it too), and only the
    items that two or more members held then can be common to two members (a family added later
    holds items two members shared), so each member is compared by its ``part``: its items
    among those, less the core. A candidate is named by its *rest* beyond the core (empty: the
    core alone), and ``pairs[rest]`` counts the member pairs whose parts have exactly ``rest``
    in common; it stays a candidate while one such pair is left. Members with the same part are
    one class: building costs the square of the classes, not of the members -- files that
    differ only in items of their own (an output folder) are one class.
    """

    def __init__(self, above: frozenset, members: list[int], items: list[frozenset]):
        self.above = above
        beyond = {m: items[m] - above for m in members}
        held = Counter(item for own in beyond.values() for item in own)
        self.core = frozenset(item for item, count in held.items() if count == len(beyond))
        shareable = frozenset(item for item, count in held.items()
                              if 1 < count < len(beyond))
        self.part: dict[int, frozenset] = {}
        self.classes: dict[frozenset, set[int]] = {}
        self.holders: dict[Hashable, set[int]] = {}
        for member, own in beyond.items():
            self._enter(member, own & shareable)
        pairs: defaultdict[frozenset, int] = defaultdict(int)
        sizes = [(part, len(those)) for part, those in self.classes.items()]
        for index, (part, size) in enumerate(sizes):
            if size > 1:
                pairs[part] += size * (size - 1) // 2
            for other, others in sizes[index + 1:]:
                pairs[part & other] += size * others
        if not self.core:
            pairs.pop(frozenset(), None)  # nothing in common beyond ``above``: no group
        self.pairs = dict(pairs)

    def _enter(self, member: int, part: frozenset) -> None:
        self.part[member] = part
        self.classes.setdefault(part, set()).add(member)
        for item in part:
            self.holders.setdefault(item, set()).add(member)

    def _count(self, rest: frozenset, pairs: int) -> bool:
        """Count ``pairs`` more (or, negative, fewer) pairs with exactly ``rest`` in common;
        True when that makes ``rest`` a candidate it was not."""
        if not pairs or not (rest or self.core):
            return False
        before = self.pairs.get(rest, 0)
        if before + pairs:
            self.pairs[rest] = before + pairs
        else:
            del self.pairs[rest]
        return before == 0

    def shared(self, rest: frozenset) -> frozenset:
        """The items beyond ``above`` that the candidate ``rest`` stands for."""
        return self.core | rest

    def group(self, rest: frozenset) -> list[int]:
        """The members holding all of the candidate ``rest``."""
        if not rest:
            return list(self.part)
        holders = sorted((self.holders[item] for item in rest), key=len)
        return list(holders[0].intersection(*holders[1:]))

    def remove(self, member: int) -> None:
        """Take out a member that moves under a family (or a member that serves)."""
        part = self.part.pop(member)
        same = self.classes[part]
        same.discard(member)
        self._count(part, -len(same))
        for other, others in self.classes.items():
            if others is not same:
                self._count(part & other, -len(others))
        if not same:
            del self.classes[part]
        for item in part:
            self.holders[item].discard(member)
            if not self.holders[item]:
                del self.holders[item]

    def add(self, member: int, items: frozenset) -> list[frozenset]:
        """Add a new family (its items beyond ``above`` and the core are all shareable: see
        the class); returns the candidates this creates."""
        part = items - self.above - self.core
        created = []
        for other, others in self.classes.items():
            common = part & other
            if self._count(common, len(others)):
                created.append(common)
        self._enter(member, part)
        return created


class _Planner:
    """The state of :func:`plan_hierarchy`: the tree so far, a :class:`_Scope` per scope and
    a heap of candidate groups by their key (the order of :func:`plan_hierarchy`).

    A merge changes two scopes only: the one it happens in (its group leaves, the new family
    joins) and the one of the node the group now calls. In the first, every other candidate
    keeps its members or loses some (a candidate inside the group's items loses the group and
    gains at most the family), so its key only gets worse: the heap keeps the old key and
    checks it when it comes to the top -- still right, it is the best; worse, it goes back with
    the new one. The second is built anew and its candidates pushed.
    """

    def __init__(self, item_sets: list[frozenset] | list[set], family_cost: int):
        self.items: list[frozenset] = [frozenset(s) for s in item_sets]
        self.files = len(self.items)
        self.parent: list[int | None] = [None] * self.files
        self.first = list(range(self.files))  # the earliest file at or below each node
        self.family_cost = family_cost
        self.scopes: dict[int | None, _Scope] = {}
        self.heap: list[tuple] = []
        self.pushed = itertools.count()  # breaks ties of equal keys: the heap never compares sets
        self._build(None, list(range(self.files)))

    def start_from_core(self) -> bool:
        """Hang every file under one node with what they all have (a file whose items are
        exactly that, else a new family), when that saves a line; False when it does not."""
        scope = self.scopes[None]
        if not scope.core or self.files < 2:
            return False
        key, group, server = self._candidate(None, frozenset())
        if key[0] >= 0:
            return False
        self._merge(None, frozenset(), group, server)
        return True

    def plan(self) -> Hierarchy:
        while (best := self._best()) is not None:
            self._merge(*best)
        return Hierarchy(self.files, tuple(self.items), tuple(self.parent))

    def _build(self, node: int | None, members: list[int]) -> None:
        above = frozenset() if node is None else self.items[node]
        scope = self.scopes[node] = _Scope(above, members, self.items)
        for rest in scope.pairs:
            self._offer(node, rest)

    def _candidate(self, node: int | None, rest: frozenset) -> tuple[tuple, list[int], int | None]:
        """``(key, group, server)`` of the candidate ``rest`` of the scope of ``node``: its
        members in file order, the member whose items are exactly the group's (None: a new
        family) and the key that orders it (the best first)."""
        scope = self.scopes[node]
        group = sorted(scope.group(rest), key=self.first.__getitem__)
        lines = len(scope.core) + len(rest)
        size = len(scope.above) + lines
        server = next((m for m in group if len(self.items[m]) == size), None)
        saving = (len(group) - 1) * lines - (0 if server is not None else self.family_cost)
        return (-saving, -len(group), -size, tuple(self.first[m] for m in group)), group, server

    def _offer(self, node: int | None, rest: frozenset, key: tuple | None = None) -> None:
        """Queue the candidate if it saves a line."""
        key = key or self._candidate(node, rest)[0]
        if key[0] < 0:
            heapq.heappush(self.heap, (key, next(self.pushed), node, rest))

    def _best(self) -> tuple | None:
        """The best candidate of all scopes, as ``(node, rest, group, server)``."""
        while self.heap:
            key, _, node, rest = heapq.heappop(self.heap)
            if rest not in self.scopes[node].pairs:
                continue  # no two members have exactly these items in common any more
            now, group, server = self._candidate(node, rest)
            if now == key:
                return node, rest, group, server
            self._offer(node, rest, now)
        return None

    def _merge(self, node: int | None, rest: frozenset, group: list[int],
               server: int | None) -> None:
        """Hang ``group`` under ``server`` (a member with exactly the group's items) or, when
        None, under a new family in the scope of ``node``."""
        scope = self.scopes[node]
        family = server is None
        if family:
            server = len(self.items)
            self.items.append(scope.above | scope.shared(rest))
            self.parent.append(node)
            self.first.append(self.first[group[0]])
        moved = [m for m in group if m != server]
        for m in moved:
            self.parent[m] = server
        if len(scope.part) - len(moved) <= len(moved):
            # Half the members or more leave: building the scope anew costs less than taking
            # them out one by one.
            gone = set(moved)
            self._build(node, [m for m in scope.part if m not in gone] + [server] * family)
        else:
            for m in moved:
                scope.remove(m)
            if family:
                for created in scope.add(server, self.items[server]):
                    self._offer(node, created)
        # A member that serves had no children: once it serves, no other member of any scope
        # it is in holds all its items, so it never serves again.
        self._build(server, moved)


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
    above existing ones (the baseline's scope) and inside them (a family's children).

    Greedy can miss the plainest plan: a first merge that saves the most may split files that
    one family with what they all have would serve better (files that share a large core and,
    in pairs, a little more). So the planner runs a second time from that one family and keeps
    the cheaper tree (:meth:`Hierarchy.cost`; a tie keeps the first): a plan never costs more
    than one base for the whole group.

    The candidates are kept between merges (:class:`_Planner`): the work grows with the pairs
    of files (files that differ only in items of their own count as one), not with that times
    the merges."""
    greedy = _Planner(item_sets, family_cost).plan()
    based = _Planner(item_sets, family_cost)
    if not based.start_from_core():
        return greedy
    alternative = based.plan()
    return alternative if alternative.cost(family_cost) < greedy.cost(family_cost) else greedy


__all__ = ["FAMILY_COST", "Hierarchy", "plan_hierarchy"]
