"""Fleet migration: several legacy YAMLs become one registry module, proven before it is written.

:func:`convert_fleet` does, for ``--from-yaml a.yaml b.yaml dir/`` (:mod:`.inputs`):

1. Every YAML is read, canonicalised and converted as a single one is (:mod:`.yaml_source`), and
   gets its own baseline (:mod:`.baseline`). Overrides after ``--`` apply to every file.
2. The planner groups the files by baseline and builds, in each group, a tree of shared functions
   (:mod:`.model`, :mod:`.plan`): the top-level family with the most YAMLs is ``<prefix>_base``, the
   others ``<prefix>_<members>_shared`` (or ``<prefix>_shared_<k>``).
3. Each function sets, one line each in the order of ``HyperTrainer.Config``, the fields where it
   differs from what it calls, one comment per line (:mod:`.comments`; a shared line's says how many
   YAMLs share its key, :mod:`.text`, and carries the YAMLs' comments on that key, once each).
4. The module is rendered from ``templates/registry_from_yaml.py.j2``, formatted by black, and
   :func:`~.proof.prove_module` executes it once and checks every recipe against its YAML; nothing
   is written unless every recipe proves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration.fleet.inputs import (
    Inputs,
    family_names,
    recipe_names,
    resolve_inputs,
)
from hyper_parallel.codegen.migration.fleet.model import (
    Fleet,
    FleetFamily,
    FleetRecipe,
    PlanNode,
    plan_nodes,
)
from hyper_parallel.codegen.migration.fleet.text import (
    count_text,
    family_doc,
    module_doc,
    parent_text,
    recipe_doc,
    shared_provenance,
)
from hyper_parallel.codegen.migration.launch import launch_warnings
from hyper_parallel.codegen.migration.recipe import changes as recipe_changes
from hyper_parallel.codegen.migration.recipe.baseline import choose_baseline, on_baseline_spec
from hyper_parallel.codegen.migration.recipe.changes import (
    Change,
    apply_changes,
    item_key,
    statement,
)
from hyper_parallel.codegen.migration.recipe.comments import (
    Provenance,
    RecipeLine,
    attach_comments,
    recipe_lines,
)
from hyper_parallel.codegen.migration.recipe.proof import (
    ConversionError,
    Obligation,
    prove_module,
    strict_error,
)
from hyper_parallel.codegen.migration.recipe.render import (
    TRAINER,
    baseline_line,
    import_lines,
    module_name_for,
)
from hyper_parallel.codegen.migration.yaml_source import key_counts, read_legacy, target_of
from hyper_parallel.codegen.rendering.templating import render_python

TEMPLATE = "registry_from_yaml.py.j2"
DEFAULT_OUTPUT = Path("recipes") / "config_registry.py"


def _check_lines(node: PlanNode, changes: list[Change], name: str) -> None:
    """The lines the renderer computed are the plan's (a planner bug otherwise)."""
    above = node.parent.items if node.parent is not None else frozenset()
    if {item_key(c) for c in changes} != node.items - above:
        raise CodegenError(f"{name}: the planned lines and the rendered ones differ (a bug in "
                           "hyper_parallel/codegen/migration/fleet/convert.py)")


def _call_of(node: PlanNode, recipes: list[FleetRecipe]) -> str:
    return f"{node.family.name if node.family is not None else recipes[node.recipe].name}()"


def _read(inputs: Inputs, names: list[str], strict: bool, base: Path | None
          ) -> list[FleetRecipe]:
    """Every input read, converted and given its baseline (``--strict``: every refusal at
    once)."""
    recipes: list[FleetRecipe] = []
    refusals: list[str] = []
    for name, item in zip(names, inputs.files):
        source = read_legacy(item.path, base, item.overrides)
        canonical, notes, target = target_of(source)
        if strict and notes:
            refusals.append(str(strict_error(source.display, notes)))
        own = choose_baseline(canonical, target)
        written, mapped, unmapped = key_counts(source)
        recipes.append(FleetRecipe(name, source, canonical, target, notes, own, item.launch,
                                   launch_warnings(source.display, source.legacy, item.launch),
                                   keys_written=written, keys_mapped=mapped, unmapped=unmapped))
    if refusals:
        raise ConversionError("\n".join(refusals))
    return recipes


def _name_families(family_nodes: list[PlanNode], names: list[str], baselines: list[Any],
                   imported: set[str]) -> int | None:
    """Give every family node its :class:`FleetFamily`; returns the index of the base (the
    top-level family with the most YAMLs), if any."""
    tops = [k for k, node in enumerate(family_nodes) if node.parent is None]
    base_index = min(tops, key=lambda k: (-len(family_nodes[k].files),
                                          family_nodes[k].files[0])) if tops else None
    # A family is named after its members: the recipes that call it directly and, for a family
    # among them, the recipes below that one.
    named_after = [[names[m] for m in sorted(m for c in node.children
                                             for m in ([c.recipe] if c.recipe is not None
                                                       else c.files))]
                   for node in family_nodes]
    for node, name in zip(family_nodes, family_names(names, named_after, base_index, imported)):
        node.family = FleetFamily(name, baselines[node.group], [names[i] for i in node.files])
    return base_index


def convert_fleet(inputs: Inputs | list[Path | str], output: Path | None = None,
                  repo: Path | None = None, strict: bool = False,
                  base: Path | None = None) -> Fleet:
    """Read, convert, plan, render and prove every input; writes nothing. ``output`` (default
    ``recipes/config_registry.py`` under ``base``) names the module in the ``torchrun`` lines;
    ``base`` as in :func:`~.from_yaml.convert`."""
    if not isinstance(inputs, Inputs):
        inputs = resolve_inputs([str(p) for p in inputs], (), base)
    repo = repo or Path(__file__).resolve().parents[4]
    output = Path(output) if output is not None else (base or Path()) / DEFAULT_OUTPUT
    names = recipe_names(inputs.files, base)
    recipes = _read(inputs, names, strict, base)
    imported = {n for r in recipes for _, n in r.own.imports}
    clash = sorted(set(names) & imported)
    if clash:
        raise CodegenError(f"recipe name(s) {', '.join(clash)} are the names of registry recipes "
                           "the module imports as baselines; rename those files")
    for recipe in recipes:
        recipe.goal = on_baseline_spec(recipe.target, recipe.own)
    file_nodes, family_nodes, baselines = plan_nodes(recipes, [r.goal for r in recipes])
    base_index = _name_families(family_nodes, names, baselines, imported)
    imports: set[tuple[str, str]] = {TRAINER}
    provs = [Provenance(r.source) for r in recipes]

    def config_of(node: PlanNode | None, group: int) -> Any:
        if node is None:
            return baselines[group].config
        return node.family.config if node.family is not None else recipes[node.recipe].goal

    # The families, parents first: their lines say which keys they come from and how many
    # YAMLs share them.
    for node in family_nodes:
        family = node.family
        below = [provs[i] for i in node.files]
        count = count_text(node.files, recipes)
        baseline = family.baseline
        if node.parent is None:
            imports |= baseline.imports
            family.parent = baseline.code
            text, paths = shared_provenance(list(baseline.keys), below, count, baseline=True)
            family.head = RecipeLine(f"config = {baseline.code}", text, paths)
        else:
            family.parent = _call_of(node.parent, recipes)
            family.head = RecipeLine(f"config = {family.parent}",
                                     parent_text(node.parent, recipes, "they have"))
        first_changes = recipe_changes.field_changes(baseline.config,
                                                     recipes[node.files[0]].goal)
        family.config = apply_changes(baseline.config, [c for c in first_changes
                                                        if item_key(c) in node.items])
        changes = recipe_changes.field_changes(config_of(node.parent, node.group), family.config)
        _check_lines(node, changes, family.name)
        for change in changes:
            legacy = below[0].legacy_keys(change)
            text, paths = (shared_provenance(legacy, below, count) if legacy
                           else (below[0].new_only(change), ()))
            family.lines.append(RecipeLine(statement(change, imports), text, paths))

    # The recipes, parents before children (the comments of a key an ancestor sets go to the
    # ancestor's line).
    module = module_name_for(output, base) or f"<the module path of {output.name[:-3]}>"
    for node in sorted(file_nodes, key=lambda n: (n.depth(), n.recipe)):
        recipe, prov, parent = recipes[node.recipe], provs[node.recipe], node.parent
        if parent is None:
            imports |= recipe.own.imports
            recipe.parent = recipe.own.code
            recipe.head = baseline_line(recipe.own, prov)
        else:
            recipe.parent = _call_of(parent, recipes)
            recipe.head = RecipeLine(f"config = {recipe.parent}",
                                     parent_text(parent, recipes, "this YAML has"))
        ancestors: list[RecipeLine] = []
        for above in node.ancestry():
            function = above.family if above.family is not None else recipes[above.recipe]
            ancestors += [function.head] + function.lines
        changes = recipe_changes.field_changes(config_of(parent, node.group), recipe.goal)
        _check_lines(node, changes, recipe.name)
        recipe.lines = recipe_lines(changes, prov, imports)
        recipe.loose = attach_comments(recipe.source, [recipe.head] + recipe.lines, ancestors)
        recipe.doc = recipe_doc(recipe, module)
    families = [node.family for node in family_nodes]
    for node in family_nodes:
        node.family.doc = family_doc(node, recipes)

    # The module order, parents before children: the families that start from a baseline or
    # another family, then the recipes in file order, each followed by the families that start
    # from it (when its settings are what several files share beyond it).
    def recipe_above(node: PlanNode) -> int | None:
        return next((n.recipe for n in reversed(node.ancestry()) if n.recipe is not None), None)

    after: dict[int | None, list[FleetFamily]] = {}  # recipe index (None: none) -> families
    for node in family_nodes:
        after.setdefault(recipe_above(node), []).append(node.family)
    order: list[Any] = list(after.get(None, []))
    for index, recipe in enumerate(recipes):
        order += [recipe] + after.get(index, [])

    command = inputs.command()
    context = {
        "docstring": module_doc(recipes, [f.name for f in families], command, inputs.extra),
        "imports": import_lines(imports),
        "exports": sorted(f.name for f in order),
        "recipes": [{"name": f.name, "doc": f.doc, "lines": [f.head] + f.lines} for f in order],
    }
    text = render_python(repo, TEMPLATE, context, "module")
    fleet = Fleet(text, output, recipes, families, command,
                  families[base_index].name if base_index is not None else None, order)
    fleet.proof_seconds = prove_module(
        text, str(output),
        [Obligation(r.name, r.source.display, r.goal, r.canonical) for r in recipes],
        "_hyper_parallel_from_yaml_fleet_")
    return fleet


__all__ = ["DEFAULT_OUTPUT", "TEMPLATE", "convert_fleet"]
