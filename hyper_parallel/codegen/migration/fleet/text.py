"""The words of a fleet module: the comments of shared lines and the docstrings.

A shared function's line says which legacy key it comes from and how many YAMLs share it
(``train.seed (3 of 6 YAMLs)``, with the line when it is the same in all of them); a first line
that calls another function says whose settings it takes. The module docstring lists every
source with its hash; a recipe's docstring names its YAML, its ``torchrun`` line and the YAML's
comments that no line carries (:class:`~.comments.Loose`).
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.codegen.migration import launch as launch_mod
from hyper_parallel.codegen.migration.fleet.model import FleetRecipe, PlanNode
from hyper_parallel.codegen.migration.recipe.comments import (
    INDENT,
    NEW_ONLY,
    Provenance,
    comment_text,
    keys_text,
    lines_text,
)
from hyper_parallel.codegen.migration.recipe.render import DOC_WIDTH, docstring_text, fill

#: A function docstring's text: its first line follows the 4 spaces and the quotes.
FUNCTION_DOC_WIDTH = DOC_WIDTH - 3


def count_text(members: list[Any], total: list[Any]) -> str:
    """``all N YAMLs`` / ``N of M YAMLs``: the YAMLs that call a family."""
    if len(members) == len(total):
        return f"all {len(members)} YAMLs"
    return f"{len(members)} of {len(total)} YAMLs"


def shared_provenance(keys: list[str], provs: list[Provenance], count: str,
                      baseline: bool = False) -> tuple[str, tuple[tuple, ...]]:
    """``(comment, key paths)`` of a shared line: the legacy keys, that ``count`` YAMLs share
    them, and their line when it is the same in every YAML (``baseline``: the line is the
    group's ``config = <baseline>``)."""
    located = [p.locate(keys) for p in provs]
    if all(not written and not cli for written, _, cli in located):
        if baseline:
            return comment_text(f"{keys_text(keys)}: the legacy default"), ()
        if not keys:
            return NEW_ONLY, ()
        return (comment_text(f"from the legacy default of {keys_text(keys)} and the other keys "
                             f"of {count}"), ())
    written_keys = [k for k in keys if any(k == key for w, _, _ in located for _, key in w)]
    cli: list[str] = []
    for _, _, found in located:
        cli += [text for _, text in found if text not in cli]
    spans = {(w[0][0], w[-1][0]) if w else None for w, _, _ in located}
    parts = []
    if written_keys:
        where = count
        if len(spans) == 1 and None not in spans:
            where += ", " + lines_text(list(spans.pop()))
        parts.append(f"{keys_text(written_keys)} ({where})")
    if cli:
        parts.append(f"command line: {' '.join(cli)}" + ("" if written_keys else f" ({count})"))
    paths: list[tuple] = []
    for written, overridden, _ in located:
        paths += [tuple(k.split(".")) for _, k in written + overridden
                  if tuple(k.split(".")) not in paths]
    return comment_text(", ".join(parts)), tuple(paths)


def parent_text(parent: PlanNode, recipes: list[FleetRecipe], these: str) -> str:
    """The comment of a first line that calls ``parent`` (a family or another recipe)."""
    if parent.family is not None:
        return comment_text(f"the settings shared by {count_text(parent.files, recipes)}")
    return comment_text(f"what {recipes[parent.recipe].name} sets: {these} all of its settings")


def _function_doc(paragraphs: list[str]) -> str:
    """Docstring paragraphs as the body of a function's docstring (indented, closing on a line of
    its own)."""
    indent = " " * INDENT
    lines = "\n\n".join(paragraphs).split("\n")
    body = "\n".join([lines[0]] + [f"{indent}{line}" if line else "" for line in lines[1:]])
    return docstring_text(f"{body}\n{indent}")


def recipe_doc(recipe: FleetRecipe, module: str) -> str:
    """The docstring of a recipe: its YAML, its ``torchrun`` line, the YAML's loose comments."""
    nproc = launch_mod.nproc_of(recipe.source.legacy, recipe.launch)
    overrides = (f" with {' '.join(recipe.source.overrides)}" if recipe.source.overrides else "")
    first = fill(f"Converted from {recipe.source.display}{overrides}.", FUNCTION_DOC_WIDTH)
    train = (f"Train it with\n\n    torchrun --nproc_per_node {nproc} -m hyper_parallel.train "
             f"--module {module} --config {recipe.name}")
    return _function_doc([first, *recipe.loose.header_paragraphs(), train,
                          *recipe.loose.note_paragraphs(DOC_WIDTH - INDENT)])


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def family_doc(node: PlanNode, recipes: list[FleetRecipe]) -> str:
    """One paragraph: who calls the family, what it starts from, how many fields it adds."""
    family = node.family
    if len(node.files) == len(recipes):
        who = f"all {len(recipes)} YAMLs"
    else:
        who = f"{_and(family.files)} ({len(node.files)} of the {len(recipes)} YAMLs)"
    count = len(family.lines)
    fields = f"the {count} field{'s' if count != 1 else ''} they agree on"
    if node.parent is None:
        start = f"{family.baseline.described}, and {fields}"
    elif node.parent.family is not None:
        start = f"what {node.parent.family.name} sets, and {fields} beyond it"
    else:
        start = (f"the settings of {recipes[node.parent.recipe].name}, which they all contain, "
                 f"and {fields} beyond them")
    direct = all(c.recipe is not None and not c.children for c in node.children)
    calls = ("Their recipes call it." if direct else
             "Their recipes call it, directly or through another function.")
    return _function_doc([fill(f"The settings shared by {who}: {start}. {calls}",
                               FUNCTION_DOC_WIDTH)])


def module_doc(recipes: list[FleetRecipe], families: list[str], command: str,
               extra: tuple[str, ...]) -> str:
    """The module docstring: what the module holds, how it was written, its sources."""
    head = (f"Recipes converted from {len(recipes)} legacy YAML{'s' if len(recipes) != 1 else ''}"
            ": one zero-argument function per YAML, each returning a fresh "
            "``HyperTrainer.Config`` (train one with ``--module M --config NAME``).")
    shown = [f"``{name}``" for name in families]
    if len(families) > 1:
        how = (f"What the YAMLs share is set once, in the shared functions {_and(shown)}: each "
               "holds what the recipes below it agree on, starting from a flavor baseline or "
               "from another of them. Each recipe calls one of them, the recipe of a YAML whose "
               "settings it contains, or the flavor baseline of its own model, ")
    elif families:
        how = (f"What the YAMLs share is set once, in {shown[0]}. Each recipe calls it, the "
               "recipe of a YAML whose settings it contains, or the flavor baseline of its own "
               "model, ")
    else:
        how = ("Each recipe calls the recipe of a YAML whose settings it contains, or the flavor "
               "baseline of its model, ")
    how += ("and sets, one line each in the order of ``HyperTrainer.Config``, the fields where "
            "its YAML differs, each commented with the legacy key and line it comes from and the "
            "YAML's own comment on that key. Before writing, the converter executed this "
            "module, called every recipe and checked that each builds its YAML's configuration "
            "and converts back to the YAML's canonical form.")
    written = f"Written by ``{command}``."
    if extra:
        written += " The overrides after ``--`` apply to every YAML."
    sources = []
    for r in recipes:
        line = f"* ``{r.name}``: {r.source.display}"
        if r.source.overrides:
            line += f" with {' '.join(r.source.overrides)}"
        sources.append(fill(line).replace("\n", "\n  ") + f"\n  (sha256 {r.source.sha256})")
    return docstring_text("\n\n".join([fill(head), fill(how), fill(written), "Sources:",
                                       "\n".join(sources)]) + "\n")


__all__ = ["FUNCTION_DOC_WIDTH", "count_text", "family_doc", "module_doc", "parent_text",
           "recipe_doc", "shared_provenance"]
