"""What a fleet conversion prints: one table, and the line counts against single files.

:func:`conversion_report` is the table printed after ``--from-yaml a.yaml b.yaml ...`` (a row per function: its
file, its name, what it calls, its lines, normalisations, the proof) with the lines still repeated
across recipes; :func:`line_counts` compares the module's length with the single-file conversions of
the same YAMLs (``python -m hyper_parallel.codegen.migration.fleet examples/yaml`` prints it,
:func:`main`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration import from_yaml
from hyper_parallel.codegen.migration.fleet.convert import convert_fleet
from hyper_parallel.codegen.migration.fleet.inputs import resolve_inputs
from hyper_parallel.codegen.migration.fleet.model import Fleet
from hyper_parallel.codegen.migration.yaml_source import display_path


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        cells = [cell.rjust(w) if c in right and n else cell.ljust(w)
                 for c, (cell, w) in enumerate(zip(row, widths))]
        out.append("  " + "  ".join(cells).rstrip())
        if n == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def conversion_report(fleet: Fleet, wrote: bool = True, base: Path | None = None) -> str:
    """The report printed after a fleet conversion: one table, a row per recipe."""
    rows = [["file", "recipe", "base", "lines", "normalisations", "proof"]]
    for family in fleet.families:
        rows.append(["(shared)", family.name, family.parent, str(len(family.lines)), "-", "-"])
    for r in fleet.recipes:
        rows.append([r.source.display, r.name, r.parent, str(len(r.lines)),
                     str(len(r.normalisations)), "ok"])
    count = len(fleet.recipes)
    lines = [f"from-yaml: {count} YAML{'s' if count != 1 else ''} -> "
             f"{display_path(fleet.output, base)}"
             + ("" if wrote else " (not written)")]
    lines += _table(rows, {3, 4})
    repeated = fleet.repeated()
    extra = sum(len(names) - 1 for names in repeated.values())
    across = fleet.repeated_across_baselines()
    lines.append(f"  module: {fleet.line_count} lines; lines repeated across recipes: "
                 + (f"{extra}" if extra else "none")
                 + (f" ({across} between recipes on different baselines, which share no "
                    "function)" if across else ""))
    lines += [f"    {code}  ({', '.join(names)})" for code, names in repeated.items()]
    notes = [(r, n) for r in fleet.recipes for n in r.normalisations]
    if notes:
        lines.append(f"  normalisations ({len(notes)}):")
        lines += [f"    {r.name}: {n.field}: {n.old!r} -> {n.new!r} ({n.why})" for r, n in notes]
    lines.append("  proof: every recipe builds its YAML's config and converts back to "
                 "canonicalize(YAML): nothing lost")
    lines += [f"  warning: {w}" for r in fleet.recipes for w in r.warnings]
    return "\n".join(lines)


def line_counts(paths: list[Path | str], repo: Path | None = None,
                base: Path | None = None) -> dict[str, Any]:
    """The fleet module's line count next to the sum of the single-file conversions' of the
    same YAMLs (each proven, nothing written)."""
    inputs = resolve_inputs([str(p) for p in paths], (), base)
    fleet = convert_fleet(inputs, repo=repo, base=base)
    per_file = {}
    for item in inputs.files:
        recipe, _ = from_yaml.convert(item.path, repo=repo, base=base, overrides=item.overrides,
                               launch=item.launch)
        per_file[recipe.source.display] = len(recipe.text.splitlines())
    single = sum(per_file.values())
    return {"files": len(per_file), "module_lines": fleet.line_count, "single_lines": single,
            "ratio": round(fleet.line_count / single, 3) if single else None,
            "repeated_lines": sum(len(n) - 1 for n in fleet.repeated().values()),
            "repeated_across_baselines": fleet.repeated_across_baselines(),
            "families": [f.name for f in fleet.families],
            "per_file": per_file}


def main(argv: list[str] | None = None) -> int:
    """``python -m hyper_parallel.codegen.migration.fleet YAML_OR_FOLDER ...``: print
    :func:`line_counts`."""
    import sys

    from hyper_parallel.trainer.config import ConfigError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m hyper_parallel.codegen.migration.fleet YAML_OR_FOLDER ...",
              file=sys.stderr)
        return 2
    try:
        counts = line_counts(args)
    except (ConfigError, CodegenError) as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        return 2
    print(f"fleet: one module of {counts['module_lines']} lines for {counts['files']} YAMLs; "
          f"{counts['files']} single-file recipes: {counts['single_lines']} lines "
          f"(the module is {counts['ratio']:.0%} of them; "
          f"{counts['repeated_lines']} lines repeated across recipes, "
          f"{counts['repeated_across_baselines']} of them between different baselines; "
          f"{len(counts['families'])} shared functions)")
    return 0


__all__ = ["conversion_report", "line_counts", "main"]
