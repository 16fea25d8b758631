"""A recipe module of a resolved ``HyperTrainer.Config``: the ``config.py`` of a run record.

``--from-yaml``'s rules, applied to a configuration instead of a YAML: the module starts from
the baseline that leaves the fewest lines to write -- ``flavor_baseline`` of the run's model
and flavor, or one of the model's registry recipes (:mod:`.recipe.baseline`) -- and sets one
line per field that differs, in the order of ``HyperTrainer.Config`` (:mod:`.recipe.changes`);
a line that a command-line flag set carries that flag as its comment. The module is laid out by
the recipe template, formatted by black and, before it is returned, executed: its recipe must
build the configuration exactly (:func:`.recipe.proof.differences`), else a
:class:`~.recipe.proof.ConversionError` names every field that differs.

A configuration that names its model only by ``model.name`` (the legacy entry's) is written on
the spec registered under that name, as ``--from-yaml`` writes it
(:func:`.recipe.baseline.on_baseline_spec`): the same model, trained the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.migration.recipe import changes as recipe_changes
from hyper_parallel.codegen.migration.recipe.baseline import (
    Baseline,
    model_flavor_candidate,
    model_registry_candidates,
    on_baseline_spec,
)
from hyper_parallel.codegen.migration.recipe.comments import RecipeLine
from hyper_parallel.codegen.migration.recipe.proof import ConversionError, differences
from hyper_parallel.codegen.migration.recipe.render import (
    TEMPLATE,
    TRAINER,
    baseline_line,
    docstring_text,
    fill,
    import_lines,
)
from hyper_parallel.codegen.rendering.templating import render_python

#: The name of a record's recipe function (``--config run``).
RECORD_RECIPE = "run"


@dataclass(frozen=True)
class Flag:
    """A command-line flag as it was given (``--training.steps=7``) and the fields of
    ``HyperTrainer.Config`` it sets (dotted paths; a legacy key's are its table row's)."""

    text: str
    fields: tuple[str, ...]


@dataclass
class ConfigRecipe:
    """A rendered, proven recipe module of one configuration."""

    text: str
    baseline: Baseline
    lines: int
    """The assignments after the baseline."""
    target: Any
    """What the recipe builds: the configuration (on its model's registered spec when it had
    none)."""


def model_of(config: Any) -> tuple[str, str | None]:
    """``(model name, flavor)`` of a configuration: its spec's name when it has one."""
    spec = config.model_spec
    name = spec.name if spec is not None else config.model.name
    return name, (config.model.config_overrides or {}).get("flavor")


def candidates(config: Any, flavors: Sequence[str] = ()) -> list[Baseline]:
    """Where the recipe may start: the flavor baselines of its model -- the flavor it asks for,
    ``flavors`` (the flavor of the recipe a command line changed: a ``config_overrides`` flavor
    on top of it is then one line), the default -- then the model's registry recipes."""
    name, flavor = model_of(config)
    tried = list(dict.fromkeys([flavor, *flavors, None]))
    return [model_flavor_candidate(name, f) for f in tried] + model_registry_candidates(name)


def _covers(field: str, dotted: str) -> bool:
    """Whether a flag setting ``field`` set the line of ``dotted`` (the same field, a field
    inside it, or the section it is in)."""
    return dotted == field or dotted.startswith(field + ".") or field.startswith(dotted + ".")


def _flag_of(change: recipe_changes.Change, flags: Sequence[Flag]) -> str:
    """The comment of a line: the last flag that set its field ("" when none did)."""
    dotted = change.dotted
    for flag in reversed(flags):
        if any(_covers(field, dotted) for field in flag.fields):
            return f"command line: {flag.text}"
    return ""


def render_config_recipe(config: Any, *, repo: Path, title: str, about: str,
                         flags: Sequence[Flag] = (), flavors: Sequence[str] = (),
                         name: str = RECORD_RECIPE, baselines: Sequence[Baseline] = ()
                         ) -> ConfigRecipe:
    """The proven recipe module of ``config`` (its function is ``name``, by default
    :data:`RECORD_RECIPE`): ``title`` and ``about`` are the docstring's first and last
    paragraphs; ``flavors``: more baselines to try (:func:`candidates`); ``baselines``: more
    still, tried first (the planner's: the recipe a plan changes), so one of them wins a tie."""
    scored = []
    for i, candidate in enumerate([*baselines, *candidates(config, flavors)]):
        target = on_baseline_spec(config, candidate)
        changes = recipe_changes.field_changes(candidate.config, target)
        scored.append((len(changes), i, candidate, target, changes))
    _, _, baseline, target, changes = min(scored, key=lambda item: item[:2])
    imports = set(baseline.imports) | {TRAINER}
    lines = [RecipeLine(recipe_changes.statement(change, imports), _flag_of(change, flags))
             for change in changes]
    head = baseline_line(baseline, _NoProvenance())
    starts = fill(f"It starts from {baseline.described} and sets, one line each in the order "
                  "of ``HyperTrainer.Config``, every field the run's configuration differs in; "
                  "a line a command-line flag set says which.")
    context = {
        "docstring": docstring_text(f"{title}\n\n{starts}\n\n{about}\n"),
        "imports": import_lines(imports),
        "name": name,
        "lines": [head, *lines],
    }
    text = render_python(repo, TEMPLATE, context, "run record recipe")
    prove(text, target, name=name)
    return ConfigRecipe(text, baseline, len(lines), target)


def prove(text: str, target: Any, filename: str = "config.py",
          name: str = RECORD_RECIPE) -> None:
    """Execute the module ``text`` and require that its recipe ``name`` builds ``target``
    exactly."""
    namespace: dict[str, Any] = {"__name__": "_hyper_parallel_record_", "__file__": filename}
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 -- our own output
    problems = differences(target, namespace[name]())
    if problems:
        raise ConversionError(
            f"{filename}: the recorded recipe does not build the run's configuration, so it "
            "was not written (a bug in the generator; please report it):\n"
            + "\n".join(f"  {p}" for p in problems))


class _NoProvenance:
    """The baseline line of a record has no legacy keys to name."""

    @staticmethod
    def describe_baseline(keys: tuple[str, ...]) -> tuple[str, tuple]:
        return "", ()


__all__ = ["RECORD_RECIPE", "ConfigRecipe", "Flag", "candidates", "model_of", "prove",
           "render_config_recipe"]
