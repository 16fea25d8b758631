"""``--from-yaml``: a legacy YAML becomes a recipe module, proven equivalent before it is written.

The steps, each in a module of its own:

1. :mod:`.yaml_source` -- the legacy parser reads the YAML (with the command-line overrides of
   ``-- --a.b=c`` or of a pasted launch command, :mod:`.launch`, applied on top); the document
   is loaded again for the line and the comments of every key. ``canonicalize_legacy`` rewrites
   equivalent spellings (reported as normalisations) and ``legacy_to_trainer_config`` converts
   the result to the ``HyperTrainer.Config`` the recipe must build (the *target*).
2. :mod:`.recipe.baseline` -- the recipe's first line: ``flavor_baseline`` of the model and
   flavor the YAML names, or a registry recipe of the same model where one leaves fewer lines.
3. :mod:`.recipe.changes` -- one assignment per field where target and baseline differ, in the
   order of ``HyperTrainer.Config``; :mod:`.recipe.comments` -- one comment each: the legacy
   key and line it comes from, and the YAML's own comment on that key.
4. :mod:`.recipe.render` -- the module, rendered from ``templates/recipe_from_yaml.py.j2`` and
   formatted by black.
5. :mod:`.recipe.proof` -- the module is executed in a fresh namespace and must build the target
   and convert back to the YAML's canonical form (``trainer_config_to_legacy``); nothing is
   written otherwise.

:func:`convert` runs them; :func:`report` is what the command line prints. Several YAMLs at once
make one registry module (:mod:`.fleet`). The text depends only on the YAML's bytes, the path it
is named by and the generator, so the recipes of ``examples/yaml/`` are regenerated and checked
like every other generated file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hyper_parallel.codegen.migration.recipe.changes import Change, field_changes
from hyper_parallel.codegen.migration.recipe.proof import (
    ConversionError,
    Obligation,
    differences,
    prove_module,
    strict_error,
)
from hyper_parallel.codegen.migration.recipe.render import ConvertedRecipe, check_name, render
from hyper_parallel.codegen.migration.yaml_source import LegacySource, display_path, read_legacy


def prove(recipe: ConvertedRecipe, filename: str) -> None:
    """Execute the module text in a fresh namespace; raise :class:`ConversionError` naming every
    field unless it reproduces the YAML exactly."""
    recipe.proof_seconds = prove_module(
        recipe.text, filename,
        [Obligation(recipe.name, recipe.source.display, recipe.target, recipe.canonical)],
        f"_hyper_parallel_from_yaml_.{recipe.name}")


def convert(path: Path, name: str | None = None, output: Path | None = None,
            repo: Path | None = None, strict: bool = False,
            base: Path | None = None, overrides: tuple[str, ...] | list[str] = (),
            launch: Any = None) -> tuple[ConvertedRecipe, Path]:
    """Read, convert, render and prove ``path``; returns the recipe and its output path
    (``recipes/<name>.py`` under ``base`` by default). Writes nothing.

    ``base`` (default: the working directory) is what the paths in the recipe are shown
    relative to -- the source YAML, and the module path of the output in the ``torchrun`` line
    -- so that the text does not depend on where the command runs from.

    ``overrides``: legacy ``--a.b=c`` tokens applied on top of the YAML (their lines say ``command
    line: --a.b=c``); ``launch``: the :class:`~.launch.Launch` they came from, if any (its own
    overrides first in ``overrides``), recorded in the docstring and checked against the config's
    world size.
    """
    repo = repo or Path(__file__).resolve().parents[3]
    stem = Path(path).name.rsplit(".", 1)[0]
    name = check_name(name, None) if name is not None else check_name(stem, Path(path).name)
    output = Path(output) if output is not None else (base or Path()) / "recipes" / f"{name}.py"
    source = read_legacy(Path(path), base, overrides)
    recipe = render(source, name, output, repo, base, launch)
    if strict and recipe.normalisations:
        raise strict_error(source.display, recipe.normalisations)
    prove(recipe, str(output))
    return recipe, output


def report(recipe: ConvertedRecipe, output: Path, wrote: bool = True,
           base: Path | None = None) -> str:
    """The short human report printed after a conversion (paths relative to ``base``)."""
    lines = [
        f"from-yaml: {recipe.source.display} -> {display_path(output, base)}"
        + ("" if wrote else " (not written)"),
        f"  baseline: {recipe.baseline.described}",
        (f"  fields mapped: {recipe.keys_mapped} of {recipe.keys_written} keys set in the YAML "
         f"({recipe.lines} differ from the baseline and got a line)"),
    ]
    if recipe.unmapped:
        lines.append("  keys at their legacy default with no new field (nothing lost):")
        lines += [f"    {key}" for key in recipe.unmapped]
    if recipe.normalisations:
        lines.append(f"  normalisations ({len(recipe.normalisations)}):")
        lines += [f"    {n.field}: {n.old!r} -> {n.new!r} ({n.why})" for n in recipe.normalisations]
    else:
        lines.append("  normalisations: none")
    if recipe.source.overrides:
        lines.append(f"  command-line overrides: {' '.join(recipe.source.overrides)}")
    lines.append(f"  proof: trainer_config_to_legacy({recipe.name}()) == canonicalize(YAML): "
                 "nothing lost")
    lines += [f"  warning: {w}" for w in recipe.warnings]
    return "\n".join(lines)


#: What callers of this module use; each name lives in the module that says so.
__all__ = ["Change", "ConversionError", "ConvertedRecipe", "LegacySource", "convert",
           "differences", "field_changes", "prove", "read_legacy", "report"]
