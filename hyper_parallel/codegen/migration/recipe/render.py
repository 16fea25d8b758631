"""The text of a converted recipe module: its name, docstring, imports and lines.

:func:`render` takes a read YAML (:mod:`.yaml_source`), converts it, picks the baseline
(:mod:`.baseline`), writes one statement per field that differs, in the order of
``HyperTrainer.Config`` (:mod:`.changes`), comments each as :mod:`.comments` says, and lays the
module out with ``templates/recipe_from_yaml.py.j2`` (formatted by black). Nothing is executed here;
:mod:`.proof` does that.
"""

from __future__ import annotations

import keyword
import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration import launch as launch_mod
from hyper_parallel.codegen.migration.recipe import changes as recipe_changes
from hyper_parallel.codegen.migration.recipe.baseline import (
    BASELINE_FUNCTION,
    Baseline,
    choose_baseline,
    on_baseline_spec,
)
from hyper_parallel.codegen.migration.recipe.comments import (
    Loose,
    Provenance,
    RecipeLine,
    attach_comments,
    recipe_lines,
)
from hyper_parallel.codegen.migration.yaml_source import (
    LegacySource,
    display_path,
    key_counts,
    target_of,
)
from hyper_parallel.codegen.rendering.render import LINE_LENGTH
from hyper_parallel.codegen.rendering.templating import render_python

TEMPLATE = "recipe_from_yaml.py.j2"
TRAINER = ("hyper_parallel.trainer.hyper_trainer", "HyperTrainer")
RESERVED_NAMES = frozenset({BASELINE_FUNCTION[1], TRAINER[1], "config", "annotations"})
#: The columns a module docstring's text may take.
DOC_WIDTH = LINE_LENGTH - 4


def name_problem(name: str) -> tuple[str, str] | None:
    """``(why, a usable name)`` when ``name`` cannot be a recipe function's name, else None."""
    reserved = RESERVED_NAMES
    if not name.isidentifier() or keyword.iskeyword(name) or name in reserved \
            or name.startswith("_"):
        fixed = re.sub(r"\W", "_", name).strip("_") or "recipe"
        if fixed[0].isdigit() or keyword.iskeyword(fixed) or fixed in reserved:
            fixed = f"recipe_{fixed}"
        why = ("is a Python keyword" if keyword.iskeyword(name) else
               "is a name the recipe module uses itself" if name in reserved else
               "starts with an underscore (private names are not recipes)"
               if name.startswith("_") and name.isidentifier() else
               "is not a Python identifier")
        return why, fixed
    return None


def check_name(name: str, stem_hint: str | None = None) -> str:
    """``name`` when it is a usable function name; else a ``CodegenError`` with the fix."""
    problem = name_problem(name)
    if problem is not None:
        origin = f" (from the file name {stem_hint!r})" if stem_hint else ""
        raise CodegenError(f"recipe name {name!r}{origin} {problem[0]}; pass --name {problem[1]}")
    return name


def docstring_text(text: str) -> str:
    """``text`` as the body of a ``\"\"\"`` string literal that evaluates back to ``text``."""
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif c.isprintable() or c == "\n":
            out.append(c)
        else:
            out.append(ascii(c)[1:-1])
    return "".join(out)


def fill(text: str, width: int = DOC_WIDTH, indent: str = "") -> str:
    """``text`` wrapped to ``width`` columns, words and paths never broken."""
    return textwrap.fill(text, width=width, break_on_hyphens=False, break_long_words=False,
                         initial_indent=indent, subsequent_indent=indent)


def module_name_for(output: Path, base: Path | None = None) -> str | None:
    """``recipes/x.py`` -> ``recipes.x`` (relative to ``base``, default the working directory),
    or None."""
    shown = display_path(output, base)
    if shown.startswith("/") or not shown.endswith(".py"):
        return None
    parts = shown[:-3].split("/")
    return ".".join(parts) if all(p.isidentifier() for p in parts) else None


def codegen_command(display: str, overrides: tuple[str, ...] = (), launch: Any = None) -> str:
    """The ``--from-yaml`` command that converts ``display`` with ``overrides`` (the launch
    command's own overrides come first in them) as one line."""
    head = "python -m hyper_parallel.codegen --from-yaml"
    if launch is not None:
        extra = tuple(overrides[len(launch.overrides):])
        text = f"{head} {shlex.quote(launch.text)}"
    else:
        extra = tuple(overrides)
        text = f"{head} {shlex.quote(display)}"
    return text + (f" -- {shlex.join(extra)}" if extra else "")


def _docstring(source: LegacySource, name: str, module: str | None, output: Path,
               baseline: Baseline, loose: Loose, launch: Any = None) -> str:
    module = module or f"<the module path of {output.name[:-3]}>"
    nproc = launch_mod.nproc_of(source.legacy, launch)
    overridden = bool(source.overrides)
    command = (codegen_command(source.display, source.overrides, launch)
               if overridden or launch is not None
               else f"python -m hyper_parallel.codegen --from-yaml {source.display}")
    what = "the YAML and the command-line overrides change" if overridden or launch is not None \
        else "the YAML changes"
    about = fill(
        f"Written by ``{command}``. It starts from {baseline.described} and sets, one line each "
        f"in the order of ``HyperTrainer.Config``, the fields {what}, each commented with the "
        "legacy key and line it comes from"
        + (" (``command line: --a.b=c`` for an override)" if overridden else "")
        + " and the YAML's own comment on that key. Before writing, the converter executed this "
        f"module and checked that ``trainer_config_to_legacy({name}())`` equals the canonical "
        "form of the YAML" + (" with the overrides applied." if overridden else "."))
    title = f"Recipe {name}, converted from {source.display}\n(sha256 {source.sha256})"
    if overridden:
        title += ",\n" + fill(f"with the command-line overrides {' '.join(source.overrides)}")
    train = ("Train it with\n\n    torchrun --nproc_per_node "
             f"{nproc} -m hyper_parallel.train --module {module} --config {name}")
    paragraphs = [title + ".", *loose.header_paragraphs(), train, about,
                  *loose.note_paragraphs(DOC_WIDTH)]
    return docstring_text("\n\n".join(paragraphs) + "\n")


def import_lines(imports: set[tuple[str, str]]) -> list[str]:
    """``from module import a, b`` lines, sorted."""
    by_module: dict[str, set[str]] = {}
    for module, name in imports:
        by_module.setdefault(module, set()).add(name)
    return [f"from {module} import {', '.join(sorted(names))}"
            for module, names in sorted(by_module.items())]


@dataclass
class ConvertedRecipe:
    """A converted YAML: the module text and what the report says about it."""

    name: str
    text: str
    source: LegacySource
    baseline: Baseline
    lines: int
    keys_written: int
    keys_mapped: int
    normalisations: list
    unmapped: list[str] = field(default_factory=list)
    """``key (reason)`` for each key the YAML writes that has no new field: an ``unsupported``
    row at its legacy default (any other value is refused), so nothing is lost."""
    canonical: Any = None
    """``canonicalize_legacy(legacy)``: what the recipe must convert back to."""
    target: Any = None
    """``legacy_to_trainer_config(canonical)`` on the baseline's spec: what the recipe must
    build."""
    proof_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    """Lines the report prints as warnings (a launch command's ``--nproc_per_node`` that does
    not fit the config)."""


def baseline_line(baseline: Baseline, provenance: Provenance) -> RecipeLine:
    """``config = <baseline>`` with its provenance (the model name and flavor keys)."""
    text, keys = provenance.describe_baseline(baseline.keys)
    return RecipeLine(f"config = {baseline.code}", text, keys)


def render(source: LegacySource, name: str, output: Path, repo: Path,
           base: Path | None = None, launch: Any = None) -> ConvertedRecipe:
    """Canonicalise, convert, pick the baseline, render and format (nothing is executed)."""
    canon, notes, target = target_of(source)
    baseline = choose_baseline(canon, target)
    target = on_baseline_spec(target, baseline)
    if name in {imported for _, imported in baseline.imports}:
        raise CodegenError(f"recipe name {name!r} is the name of its baseline recipe, which the "
                           f"module imports; pass another --name (e.g. --name my_{name})")
    provenance = Provenance(source)
    imports = set(baseline.imports) | {TRAINER}
    lines = recipe_lines(recipe_changes.field_changes(baseline.config, target), provenance,
                         imports)
    head = baseline_line(baseline, provenance)
    loose = attach_comments(source, [head] + lines)
    module = module_name_for(output, base)
    context = {
        "docstring": _docstring(source, name, module, output, baseline, loose, launch),
        "imports": import_lines(imports),
        "name": name,
        "lines": [head] + lines,
    }
    text = render_python(repo, TEMPLATE, context, "recipe")
    written, mapped, unmapped = key_counts(source)
    return ConvertedRecipe(name, text, source, baseline, len(lines), written, mapped, notes,
                  unmapped, canon, target,
                  warnings=launch_mod.launch_warnings(source.display, source.legacy, launch))


__all__ = ["DOC_WIDTH", "RESERVED_NAMES", "TEMPLATE", "TRAINER", "ConvertedRecipe",
           "baseline_line", "check_name", "codegen_command", "docstring_text", "fill",
           "import_lines", "module_name_for", "name_problem", "render"]
