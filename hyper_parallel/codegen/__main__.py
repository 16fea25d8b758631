"""``python -m hyper_parallel.codegen [generate | check | --check] [--root DIR] [--out DIR]``.

Migration commands (:mod:`.migration.from_yaml`, :mod:`.migration.to_yaml`):

* ``--from-yaml old.yaml [--name NAME] [-o PATH] [--force] [--strict] [-- --a.b=c ...]``: write
  the recipe module of a legacy YAML (default ``recipes/<NAME>.py``, NAME from the file name)
  after proving that it converts back to the YAML's canonical form; prints a report.
  ``--strict`` refuses a YAML that needs any normalisation. An existing file is replaced only
  with ``--force``. Legacy overrides after ``--`` (the syntax ``scripts/train_lm.py`` takes) are
  folded into the recipe, their lines commented ``# command line: --a.b=c``.
* ``--from-yaml "torchrun --nproc_per_node 4 scripts/train_lm.py old.yaml --a.b=c"`` (one
  argument) or ``--from-yaml -- torchrun ... old.yaml --a.b=c``: the launch command of a legacy
  run, pasted whole (:mod:`.migration.launch`): the YAML and its overrides are taken from it, and a
  ``--nproc_per_node`` that does not fit the config's parallel degrees is a warning.
* ``--from-yaml a.yaml b.yaml dir/ [-o PATH] [--force] [--strict] [-- --a.b=c ...]``: several
  YAMLs (a folder: its ``*.yaml`` / ``*.yml`` files in name order) become one registry module
  (default ``recipes/config_registry.py``, :mod:`.migration.fleet`): shared family functions holding
  what groups of them share, one recipe per file named after it (``--name`` is refused), every
  recipe proven; prints one table. ``--strict`` applies to every file; overrides after ``--`` apply to every file.
* ``--from-yaml ... --preflight [--gpu NAME | --gpu-memory GiB]``: then preflight every recipe
  written (:mod:`hyper_parallel.preflight`: the real code at the recipe's world size, on this
  machine) and print one table, a row per recipe; recipes whose simulations are the same are
  preflighted once, the others side by side on the machine's cores. The files are written
  either way (the conversion is proven); the exit status is then preflight's: 1 when a recipe
  does not fit or fails to build at its size, 2 when one cannot be built as configured (named
  in its YAML's keys, at their lines).
* ``--to-yaml --module M --config F [-o PATH] [--force]``: the legacy YAML of a recipe (stdout
  by default), or the new-only fields that prevent one.

* ``generate`` (default): write the generated files that changed (atomically) and delete
  generated files the table no longer produces; prints what changed. When every file's recorded
  input hashes still match (``pipeline.up_to_date``) nothing is rendered, formatted or
  converted. ``--out DIR`` writes the whole set under ``DIR`` instead of the repository
  (nothing is deleted).
* ``check`` / ``--check``: regenerate into a temporary directory and compare; silent and exit 0
  when current, else per file a unified diff, the reason and the fix, exit 1.
* ``--timings-json FILE``: also write ``{"black_seconds": ..., "recipes_seconds": ...}`` (with
  ``--from-yaml``: ``{"proof_seconds": ...}``), read by bench/bench_codegen.py.

Exit status 2: the table, a model descriptor (or a class they describe) is wrong; every problem
is printed. For ``--from-yaml`` / ``--to-yaml``: 2 when the YAML (or the recipe) is invalid or
cannot be converted, 1 when the output exists (no ``--force``) or the conversion would not be
exact (nothing is written).

Written files (generated ones, ``--from-yaml`` / ``--to-yaml -o``) get the mode the umask gives
a new file (``0o666 & ~umask``), also when ``--force`` replaces one. Missing parent folders of
an output are created. An output path that cannot be written (a read-only folder, a folder in
the way, a path under a file) is one line, exit 2, and leaves nothing behind. Without
``--force`` the output is created exclusively: a file that appears meanwhile is never replaced.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hyper_parallel.codegen import pipeline, staleness
from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.rendering import outputs


def _default_root() -> Path:
    # The repository holding this package (an editable install / a checkout).
    return Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hyper_parallel.codegen",
        description="Generate the configuration code and docs from codegen/field_table.yaml, "
        "and the recipe modules from the model descriptors in codegen/models/.",
    )
    parser.add_argument("command", nargs="?", choices=("generate", "check"), default="generate")
    parser.add_argument("--check", action="store_true", help="same as the check command")
    parser.add_argument("--root", type=Path, default=None, help="repository root")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the generated files under this directory instead")
    parser.add_argument("--timings-json", type=Path, default=None)
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    migrate = parser.add_argument_group("migration")
    migrate.add_argument("--from-yaml", nargs="*", metavar="OLD_YAML",
                         help="write the recipe module of a legacy YAML (several YAMLs or a "
                         "folder: one registry module; a quoted launch command: its YAML and "
                         "overrides); legacy overrides follow --")
    migrate.add_argument("--name", help="recipe function name (default: the YAML's file name)")
    migrate.add_argument("-o", "--output", type=Path, metavar="PATH",
                         help="output file (--from-yaml: recipes/NAME.py; --to-yaml: stdout)")
    migrate.add_argument("--force", action="store_true", help="replace an existing output file")
    migrate.add_argument("--strict", action="store_true",
                         help="refuse a YAML that needs any normalisation")
    migrate.add_argument("--preflight", action="store_true",
                         help="then preflight every recipe written at its world size (python -m "
                         "hyper_parallel.preflight): exit 1 when one does not fit, 2 when one "
                         "cannot be built as configured")
    migrate.add_argument("--gpu", metavar="NAME",
                         help="the GPU --preflight judges against (default h100-80gb)")
    migrate.add_argument("--gpu-memory", type=float, metavar="GIB",
                         help="or the GPU's memory in GiB")
    migrate.add_argument("--jobs", metavar="LAUNCH_OPTIONS",
                         help="then write one cluster job per recipe written: the options of "
                         "python -m hyper_parallel.launch, quoted as one argument (\"--scheduler "
                         "slurm --gpus-per-node 8 --time 24:00:00\"); never submitted")
    migrate.add_argument("--jobs-dir", type=Path, default=None, metavar="DIR",
                         help="where --jobs writes (default: jobs/)")
    migrate.add_argument("--to-yaml", action="store_true",
                         help="write the legacy YAML of the recipe --module/--config")
    migrate.add_argument("--module", help="recipe module (with --to-yaml)")
    migrate.add_argument("--config", help="recipe function (with --to-yaml)")
    argv = list(sys.argv[1:] if argv is None else argv)
    after_dash = None
    if "--" in argv:
        dash = argv.index("--")
        if any(a == "--from-yaml" or a.startswith("--from-yaml=") for a in argv[:dash]):
            argv, after_dash = argv[:dash], argv[dash + 1:]
    args = parser.parse_args(argv)
    args.after_dash = after_dash
    root = (args.root or _default_root()).resolve()
    if args.from_yaml is not None or args.to_yaml:
        return _migrate(parser, args, root)
    stray = [flag for flag, value in (("--name", args.name), ("-o/--output", args.output),
                                      ("--force", args.force), ("--strict", args.strict),
                                      ("--module", args.module), ("--config", args.config),
                                      ("--preflight", args.preflight), ("--gpu", args.gpu),
                                      ("--gpu-memory", args.gpu_memory), ("--jobs", args.jobs),
                                      ("--jobs-dir", args.jobs_dir))
             if value]
    if stray:
        parser.error(f"{', '.join(stray)} go with --from-yaml or --to-yaml")
    try:
        if args.check or args.command == "check":
            stale = staleness.check(root)
            if stale:
                print(staleness.format_report(stale), file=sys.stderr)
                return 1
            return 0
        # Every recorded input hash matches: render nothing, run no black, import no torch.
        current = pipeline.up_to_date(root) if args.out is None else None
        if current is not None:
            return _nothing_to_do(current, args)
        generation = pipeline.generate(root)
        changed = pipeline.write(root, generation, out_root=args.out)
    except pipeline.WriteError as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        return 2
    except CodegenError as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        print("codegen: nothing was written; fix the file and line named above "
              "(codegen/field_table.yaml, a descriptor in codegen/models/, or the class named) "
              "and run `make codegen` again", file=sys.stderr)
        return 2
    if args.timings_json is not None and not _timings(args.timings_json, {
            "black_seconds": generation.black_seconds,
            "recipes_seconds": generation.recipes_seconds}):
        return 2
    if not args.quiet:
        for rel in changed:
            print(f"codegen: wrote {rel}" if (args.out or root / rel).exists()
                  else f"codegen: deleted {rel}")
        if not changed:
            print(f"codegen: {len(generation.files)} generated files are up to date")
    return _reconvert_recipes(root, generation, changed, args)


_RERUN = pipeline.RERUN_ENV


def _nothing_to_do(count: int, args: argparse.Namespace) -> int:
    if args.timings_json is not None and not _timings(
            args.timings_json, {"black_seconds": 0.0, "recipes_seconds": 0.0}):
        return 2
    if not args.quiet:
        print(f"codegen: {count} generated files are up to date (no input changed since they "
              "were generated: nothing was rendered)")
    return 0


def _timings(path: Path, timings: dict[str, float]) -> bool:
    """Write ``--timings-json``; False (the error printed) when the path cannot be written."""
    try:
        pipeline.atomic_write(path, json.dumps(timings))
    except pipeline.WriteError as exc:
        print(f"codegen: error: --timings-json: {exc}", file=sys.stderr)
        return False
    return True


def _reconvert_recipes(root: Path, generation: pipeline.Generation, changed: list[str],
                       args: argparse.Namespace) -> int:
    """The recipes of the example YAMLs were converted with the configuration modules this
    process imported; when this run rewrote those modules (or could not convert a recipe with
    the broken ones it found), convert the recipes once more in a fresh process, which imports
    the modules just written, so that one ``make codegen`` always reaches the fixed point.
    Returns the exit status."""
    rewritten = set(generation.modules) & set(changed)
    if not (rewritten or generation.unverified) or os.environ.get(_RERUN) \
            or not outputs.example_recipes(root):
        return 0
    if args.out is not None:
        for rel, why in generation.unverified.items():
            print(f"codegen: not written: {rel} (its conversion needs the configuration modules "
                  f"just written under {args.out}: {why}); run the generator on the repository",
                  file=sys.stderr)
        return 1 if generation.unverified else 0
    command = [sys.executable, "-m", "hyper_parallel.codegen", "--root", str(root)]
    if args.quiet:
        command.append("-q")
    return subprocess.run(command, env={**os.environ, _RERUN: "1"}, check=False).returncode


def _write_output(path: Path, text: str, force: bool) -> str | None:
    """Write ``path`` atomically, with its umask mode; without ``force`` only if it does not
    exist, decided atomically (no window between the check and the write). Returns the error
    text when it exists and ``force`` is not set; a path that cannot be written raises
    :class:`pipeline.WriteError` (nothing is left behind)."""
    try:
        pipeline.atomic_write(path, text, exclusive=not force)
    except FileExistsError:
        return (f"{path} exists; nothing was written (pass --force to replace it, or -o to "
                "choose another path)")
    return None


def _from_yaml(parser: argparse.ArgumentParser, args: argparse.Namespace, root: Path
               ) -> tuple[str | None, list[tuple[str, Any, Any, int | None]], Path]:
    """Convert what ``--from-yaml`` names (one YAML, several, a launch command) and write it;
    returns the problem of an existing output, if any, ``(recipe name, its YAML's source, the
    config it builds, the world its launch command gives or None)`` of each recipe, and the
    module written."""
    from hyper_parallel.codegen.migration import fleet, from_yaml
    from hyper_parallel.codegen.migration.launch import launch_world

    stray = [v for v in args.from_yaml if v in ("generate", "check") and not Path(v).exists()]
    if stray:
        parser.error("check / --check / --out regenerate the repository's files; they do not go "
                     "with --from-yaml or --to-yaml (use -o for the output path)")
    inputs = fleet.resolve_inputs(args.from_yaml, args.after_dash or ())
    if inputs.single:
        item = inputs.files[0]
        recipe, output = from_yaml.convert(item.path, args.name, args.output, root,
                                           strict=args.strict, overrides=item.overrides,
                                           launch=item.launch)
        problem = _write_output(output, recipe.text, args.force)
        if args.timings_json is not None \
                and not _timings(args.timings_json, {"proof_seconds": recipe.proof_seconds}):
            raise _TimingsFailed
        if not args.quiet or problem:
            print(from_yaml.report(recipe, output, wrote=problem is None))
        return problem, [(recipe.name, recipe.source, recipe.target,
                          launch_world(recipe.source.legacy, item.launch))], output
    if args.name is not None:
        parser.error(f"--name goes with one YAML; with {len(inputs.files)} YAMLs each recipe is "
                     "named after its file (rename a file to rename its recipe)")
    result = fleet.convert_fleet(inputs, args.output, root, strict=args.strict)
    problem = _write_output(result.output, result.text, args.force)
    if args.timings_json is not None \
            and not _timings(args.timings_json, {"proof_seconds": result.proof_seconds}):
        raise _TimingsFailed
    if not args.quiet or problem:
        print(fleet.conversion_report(result, wrote=problem is None))
    return problem, [(r.name, r.source, r.goal, launch_world(r.source.legacy, r.launch))
                     for r in result.recipes], result.output


def _preflight(recipes: list[tuple[str, Any, Any, int | None]], gpu: Any
               ) -> tuple[int, dict[str, Any]]:
    """Preflight each converted recipe (:mod:`hyper_parallel.preflight`) at the world its
    launch command gives, else its degrees', and print one table; a recipe that cannot be
    built is named in its YAML's keys, at their lines. Returns the exit status
    (:func:`~hyper_parallel.preflight.report.exit_status`) and the reports by recipe."""
    from hyper_parallel.codegen.migration.yaml_source import in_yaml_terms
    from hyper_parallel.preflight.many import preflight_many
    from hyper_parallel.preflight.report import exit_status, summary
    from hyper_parallel.utils.errors import ConfigError

    results = preflight_many([config for _, _, config, _ in recipes], gpu,
                             worlds=[world for _, _, _, world in recipes])
    named = []
    for (name, source, _, _), result in zip(recipes, results):
        if isinstance(result, ConfigError):
            result = in_yaml_terms(result, source.display, source.lines, source.cli)
        named.append((name, result))
    print(summary(named, gpu))
    return (exit_status([result for _, result in named]),
            {name: result for name, result in named if not isinstance(result, Exception)})


def _jobs(args: argparse.Namespace, recipes: list[tuple[str, Any, Any, int | None]],
          module: Path, reports: dict[str, Any]) -> int:
    """``--jobs``: one cluster job per recipe (:mod:`hyper_parallel.launch.fleet`); prints what
    was written and each recipe that got none. Returns 2 when one got none, else 0."""
    import shlex

    from hyper_parallel.launch.fleet import write_jobs

    command = shlex.join(["python", "-m", "hyper_parallel.codegen", *sys.argv[1:]])
    folder = args.jobs_dir or Path("jobs")
    written, problems = write_jobs([(name, world) for name, _, _, world in recipes], module,
                                   args.jobs, folder, command, reports, args.force)
    if not args.quiet or problems:
        print(f"jobs: wrote {len(written)} into {folder}")
    for problem in problems:
        print(f"jobs: error: {problem}", file=sys.stderr)
    return 2 if problems else 0


class _TimingsFailed(Exception):
    """``--timings-json`` could not be written (the error is printed)."""


def _migrate(parser: argparse.ArgumentParser, args: argparse.Namespace, root: Path) -> int:
    from hyper_parallel.codegen.migration import from_yaml, to_yaml
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.trainer.config import ConfigError

    if args.from_yaml is not None and args.to_yaml:
        parser.error("--from-yaml and --to-yaml go one way each; pass one of them")
    if args.to_yaml and not (args.module and args.config):
        parser.error("--to-yaml needs --module M --config F (the recipe to convert)")
    if args.from_yaml is not None and (args.module or args.config):
        parser.error("--module/--config go with --to-yaml, not --from-yaml")
    if args.check or args.command == "check" or args.out is not None:
        parser.error("check / --check / --out regenerate the repository's files; they do not go "
                     "with --from-yaml or --to-yaml (use -o for the output path)")
    if args.to_yaml and (args.preflight or args.gpu or args.gpu_memory is not None):
        parser.error("--preflight, --gpu and --gpu-memory go with --from-yaml (preflight a "
                     "recipe with python -m hyper_parallel.preflight --module M --config F)")
    if args.jobs_dir is not None and not args.jobs:
        parser.error("--jobs-dir says where --jobs writes; add --jobs")
    if args.to_yaml and args.jobs:
        parser.error("--jobs goes with --from-yaml (launch a recipe with python -m "
                     "hyper_parallel.launch --module M --config F)")
    if not args.preflight and (args.gpu or args.gpu_memory is not None):
        parser.error("--gpu / --gpu-memory choose the GPU of --preflight; add --preflight")
    if args.gpu and args.gpu_memory is not None:
        parser.error("--gpu and --gpu-memory name the same thing; pass one of them")
    preflight_code = jobs_code = 0
    try:
        gpu = None
        if args.preflight:
            from hyper_parallel.preflight.check import choose_gpu

            gpu = choose_gpu(args.gpu, args.gpu_memory)  # a bad name before anything is written
        if args.to_yaml:
            text = to_yaml.legacy_yaml(args.module, args.config)
            if args.output is None:
                sys.stdout.write(text)
                return 0
            problem = _write_output(args.output, text, args.force)
            if problem is None and not args.quiet:
                print(f"to-yaml: wrote {args.output}")
        else:
            problem, recipes, module = _from_yaml(parser, args, root)
            reports: dict[str, Any] = {}
            if gpu is not None and problem is None:
                preflight_code, reports = _preflight(recipes, gpu)
            if args.jobs and problem is None:
                jobs_code = _jobs(args, recipes, module, reports)
    except _TimingsFailed:
        return 2
    except from_yaml.ConversionError as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        return 1
    except pipeline.WriteError as exc:
        print(f"codegen: error: {exc}; nothing was written (choose another path with -o)",
              file=sys.stderr)
        return 2
    except (ConfigError, RecipeError, CodegenError) as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        return 2
    if problem is not None:
        print(f"codegen: error: {problem}", file=sys.stderr)
        return 1
    return max(preflight_code, jobs_code)


if __name__ == "__main__":
    raise SystemExit(main())
