"""The proof that a converted recipe module reproduces its YAMLs, before anything is written.

:func:`prove_module` executes the module text once in a fresh namespace, calls every recipe it
is given an :class:`Obligation` for, and requires of each that it builds the YAML's
``HyperTrainer.Config`` exactly and that ``trainer_config_to_legacy`` of it equals the YAML's
canonical form (``canonicalize_legacy``). A recipe that falls short is a
:class:`ConversionError` naming every field that differs; nothing is written then.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration.recipe.changes import same


class ConversionError(CodegenError):
    """The YAML converts, but not exactly (the proof failed) or not as asked (``--strict``)."""


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            out.update(_flat(getattr(value, f.name), f"{prefix}{f.name}."))
        return out
    return {prefix[:-1]: value}


def differences(expected: Any, actual: Any) -> list[str]:
    """``field: expected X, got Y`` for every leaf that differs."""
    a, b = _flat(expected), _flat(actual)
    return [f"{k}: expected {a.get(k)!r}, the recipe gives {b.get(k)!r}"
            for k in sorted(set(a) | set(b)) if not same(a.get(k), b.get(k))]


@dataclass(frozen=True)
class Obligation:
    """What one recipe function of a module must build: ``target`` (the YAML's
    ``HyperTrainer.Config``), converting back to ``canonical`` (the YAML's canonical form)."""

    name: str
    display: str
    target: Any
    canonical: Any


def recipe_problems(config: Any, target: Any, canonical: Any) -> list[str]:
    """Every way ``config`` (what a recipe built) falls short of ``target`` and ``canonical``."""
    from hyper_parallel.config import legacy_adapter
    from hyper_parallel.trainer.config import ConfigError

    problems = differences(target, config)
    try:
        back = legacy_adapter.trainer_config_to_legacy(config)
    except ConfigError as exc:
        problems.append(f"converting the recipe back to the legacy schema failed: {exc}")
    else:
        problems += differences(canonical, back)
    return problems


def prove_module(text: str, filename: str, obligations: list[Obligation],
                 module: str = "_hyper_parallel_from_yaml_") -> float:
    """Execute ``text`` once in a fresh namespace, call every recipe of ``obligations`` (all of
    them before checking any: one recipe changing what another returned would show), and
    raise :class:`ConversionError` naming every field of every recipe that does not reproduce
    its YAML exactly. Returns the seconds it took."""
    start = time.perf_counter()
    namespace: dict[str, Any] = {"__name__": module, "__file__": filename}
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 -- our own output
    built = [(item, namespace[item.name]()) for item in obligations]
    failed = []
    for item, config in built:
        problems = recipe_problems(config, item.target, item.canonical)
        if problems:
            failed.append(
                f"{item.display}: the emitted recipe{'' if len(obligations) == 1 else ' ' + item.name}"
                " does not reproduce the YAML, so nothing was written (this is a bug in the "
                "converter or the field table; please report it):\n"
                + "\n".join(f"  {p}" for p in problems))
    if failed:
        raise ConversionError("\n".join(failed))
    return time.perf_counter() - start


def strict_error(display: str, normalisations: list) -> ConversionError:
    """``--strict``'s refusal of the YAML ``display`` that needs ``normalisations``."""
    return ConversionError(
        f"{display}: --strict refuses the conversion; the YAML needs "
        f"{len(normalisations)} normalisation(s):\n"
        + "\n".join(f"  {n.field}: {n.old!r} -> {n.new!r} ({n.why})" for n in normalisations)
        + "\nwrite those keys as shown (the new value) and convert again, or drop --strict"
    )


__all__ = ["ConversionError", "Obligation", "differences", "prove_module", "recipe_problems",
           "strict_error"]
