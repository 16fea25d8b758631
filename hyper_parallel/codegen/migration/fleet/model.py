"""The parts of a fleet conversion: its recipes, its shared functions and the plan's tree.

:class:`FleetRecipe` is one YAML (its conversion and its place in the plan),
:class:`FleetFamily` a shared function, :class:`Fleet` the converted module and the figures its
report prints. :func:`plan_nodes` groups the recipes by baseline -- only recipes on the same
baseline can share a function -- runs the planner (:func:`~.plan.plan_hierarchy`) on each
group and returns its tree as :class:`PlanNode` objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.migration.fleet.plan import plan_hierarchy
from hyper_parallel.codegen.migration.recipe import changes as recipe_changes
from hyper_parallel.codegen.migration.recipe.baseline import Baseline
from hyper_parallel.codegen.migration.recipe.changes import item_key
from hyper_parallel.codegen.migration.recipe.comments import Loose, RecipeLine
from hyper_parallel.codegen.migration.yaml_source import LegacySource


@dataclass
class FleetRecipe:
    """One YAML of the fleet: its conversion, and where the plan puts it."""

    name: str
    source: LegacySource
    canonical: Any
    target: Any
    normalisations: list
    own: Baseline
    launch: Any = None
    warnings: list[str] = field(default_factory=list)
    parent: str = ""
    """The call its first line makes: a shared function's, another recipe's, or its baseline's."""
    goal: Any = None
    """What the recipe builds: ``target`` on the spec of its baseline."""
    head: RecipeLine | None = None
    """Its first line: ``config = <parent>``."""
    lines: list[RecipeLine] = field(default_factory=list)
    """The lines after it, in the order of ``HyperTrainer.Config``."""
    loose: Loose = field(default_factory=Loose)
    """The YAML's comments that no line carries (its docstring shows them)."""
    doc: str = ""
    keys_written: int = 0
    keys_mapped: int = 0
    unmapped: list[str] = field(default_factory=list)


@dataclass
class FleetFamily:
    """A shared function: what the recipes below it agree on beyond what it calls."""

    name: str
    baseline: Baseline
    """The baseline of its group (every recipe below it starts from it)."""
    files: list[str]
    """The recipes that call it, directly or through other functions, in file order."""
    parent: str = ""
    """The call its first line makes: its baseline's, another family's, or a recipe's."""
    head: RecipeLine | None = None
    lines: list[RecipeLine] = field(default_factory=list)
    doc: str = ""
    config: Any = None


@dataclass
class Fleet:
    """A converted fleet: the module text and what the report says about it."""

    text: str
    output: Path
    recipes: list[FleetRecipe]
    families: list[FleetFamily]
    """The shared functions, parents before children."""
    command: str
    base: str | None = None
    """The family named ``<prefix>_base`` (the top-level one with the most YAMLs), if any."""
    order: list[Any] = field(default_factory=list)
    """Every function (families and recipes) in module order."""
    proof_seconds: float = 0.0

    @property
    def line_count(self) -> int:
        return len(self.text.splitlines())

    def functions(self) -> list[Any]:
        """Every function the module defines, in its order."""
        return self.order or [*self.families, *self.recipes]

    def repeated(self) -> dict[str, list[str]]:
        """Each line that two or more functions set -> the functions setting it."""
        found: dict[str, list[str]] = {}
        for function in self.functions():
            for line in function.lines:
                found.setdefault(line.code, []).append(function.name)
        return {code: names for code, names in found.items() if len(names) > 1}

    def repeated_across_baselines(self) -> int:
        """How many of the repeated lines (counted as in the report: a line set ``k`` times is
        ``k - 1``) only repeat because their functions are on different baselines."""
        baselines = self.baselines()
        return sum(len({baselines[n] for n in names}) - 1 for names in self.repeated().values())

    def baselines(self) -> dict[str, str]:
        """Each function's name -> the baseline call of its group."""
        return {f.name: (f.baseline if isinstance(f, FleetFamily) else f.own).code
                for f in self.functions()}


@dataclass
class PlanNode:
    """A node of the plan while rendering: a recipe (``recipe``) or a family (``family``)."""

    group: int
    items: frozenset
    parent: PlanNode | None
    files: list[int]
    """The indices of the recipes at or below it, in file order."""
    recipe: int | None = None
    family: FleetFamily | None = None
    children: list[PlanNode] = field(default_factory=list)

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()

    def ancestry(self) -> list[PlanNode]:
        """Its ancestors, the top-most first."""
        return [] if self.parent is None else self.parent.ancestry() + [self.parent]

    def order(self) -> tuple:
        """The pre-order position in its group's tree (children in file order)."""
        return (self.group,) + tuple(n.files[0] for n in self.ancestry() + [self])


def plan_nodes(recipes: list[FleetRecipe], goals: list[Any]
                ) -> tuple[list[PlanNode], list[PlanNode], list[Baseline]]:
    """Group the recipes by baseline, plan each group and return ``(recipe nodes, family
    nodes, the baseline of each group)``; family nodes parents first (pre-order, children in
    file order)."""
    codes = list(dict.fromkeys(r.own.code for r in recipes))
    baselines = [next(r.own for r in recipes if r.own.code == code) for code in codes]
    file_nodes: list[PlanNode | None] = [None] * len(recipes)
    family_nodes: list[PlanNode] = []
    for group, (code, baseline) in enumerate(zip(codes, baselines)):
        members = [i for i, r in enumerate(recipes) if r.own.code == code]
        item_sets = [frozenset(item_key(c) for c in recipe_changes.field_changes(baseline.config, goals[i]))
                     for i in members]
        tree = plan_hierarchy(item_sets)
        nodes: list[PlanNode] = []
        for node, below in enumerate(tree.below_each()):
            files = [members[f] for f in below]
            nodes.append(PlanNode(group, tree.items[node], None, files,
                               recipe=members[node] if node < tree.files else None))
        for node, parent in enumerate(tree.parent):
            if parent is not None:
                nodes[node].parent = nodes[parent]
                nodes[parent].children.append(nodes[node])
        for node in nodes:
            node.children.sort(key=lambda n: n.files[0])
            if node.recipe is None:
                family_nodes.append(node)
            else:
                file_nodes[node.recipe] = node
    family_nodes.sort(key=PlanNode.order)
    return [n for n in file_nodes if n is not None], family_nodes, baselines


__all__ = ["Fleet", "FleetFamily", "FleetRecipe", "PlanNode", "plan_nodes"]
