"""The fastest layouts that fit a cluster, for a recipe, ranked; written as recipes if asked.

    python -m hyper_parallel.plan --module M --config C [--a.b=c ...] --nodes N [options]
    python -m hyper_parallel.plan old.yaml [--train.x=...] --nodes N [options]

Options: ``--nodes N`` (required) and ``--gpus-per-node G`` (default 8): the cluster;
``--gpu NAME`` (``a100-80gb``, ``h100-80gb``, ``h100-96gb``, ``h200``, ``b200``; default
``h100-80gb``), what each rank's memory is judged against and, without ``--hardware``, whose
datasheet prices the step; ``--hardware FILE``: a measured profile
(``bench/calibrate_hardware.py``) instead of the datasheet; ``--budget N``: preflight the N
most promising candidates (a pipeline counts as the layers it steps; default: the recipe's
own and the best of each family of model-parallel axes that might be best, within 25 % of the
best step found, at most 4 preflights and one pipeline's); ``--json``: one object on
stdout; ``--write K DIR``: the best K layouts as recipe modules in DIR (only the fields the
plan changes, proven to build the planned configuration); ``--jobs "LAUNCH OPTIONS"`` with
``--write``: each one's job file in DIR too (``python -m hyper_parallel.launch``'s options,
e.g. ``--scheduler slurm --time 24:00:00``; written, never submitted); ``--force``: replace
different files in DIR.

The plan keeps the recipe's global batch, sequence length and everything else, and searches
the data-parallel shard and replicate degrees, tensor, pipeline (schedule, virtual stages,
micro-batches), context (its modes) and expert parallelism, the local batch and activation
checkpointing; ``docs/plan.md`` says how it prunes, bounds its work and prices a step.

Exit status: 0 when some layout fits, 1 when none does, 2 on a configuration error (named in
the command line's own fields; a legacy YAML's in its keys, at their ``file:line``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")


def _options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hyper_parallel.plan", allow_abbrev=False,
                                     add_help=False)
    parser.add_argument("--nodes", type=int, default=None)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--gpu", default=None)
    parser.add_argument("--hardware", default=None)
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", nargs=2, default=None, metavar=("K", "DIR"))
    parser.add_argument("--jobs", default=None)
    parser.add_argument("--force", action="store_true")
    return parser


def _check(options: argparse.Namespace) -> tuple[int, Path | None]:
    """The options' own rules, each a ``ConfigError`` naming the option."""
    from hyper_parallel.utils.errors import ConfigError

    if options.nodes is None:
        raise ConfigError("the plan needs the cluster's size: give --nodes N (and "
                          "--gpus-per-node G, default 8)", path="--nodes")
    for name in ("nodes", "gpus_per_node"):
        if getattr(options, name) < 1:
            raise ConfigError(f"{getattr(options, name)} is not a count; give at least 1",
                              path=f"--{name.replace('_', '-')}")
    if options.jobs is not None and options.write is None:
        raise ConfigError("job files are written next to the recipes they run: give --write "
                          "K DIR too", path="--jobs")
    if options.write is None:
        return 0, None
    count, folder = options.write
    try:
        k = int(count)
    except ValueError:
        raise ConfigError(f"{count!r} is not a number of layouts; give --write K DIR",
                          path="--write") from None
    if k < 1:
        raise ConfigError(f"{k}: give how many of the best layouts to write (>= 1)",
                          path="--write")
    return k, Path(folder)


def main(argv: Sequence[str] | None = None) -> int:
    from hyper_parallel.codegen.errors import CodegenError
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.train import in_entry_terms
    from hyper_parallel.utils.errors import ConfigError
    from hyper_parallel.utils.tool_options import tool_args, tool_options

    args = tool_args(argv)
    parsed = tool_options(_options(), __doc__, args)
    if isinstance(parsed, int):
        return parsed
    options, rest = parsed
    from hyper_parallel.plan.output import to_json, to_text
    from hyper_parallel.plan.search import plan

    try:
        count, folder = _check(options)
        source, base = _parse(rest)
        hardware, gpu = _profile(options)
        progress = None if options.json else (lambda text: print(text, file=sys.stderr))
        result = plan(base, nodes=options.nodes, gpus_per_node=options.gpus_per_node, gpu=gpu,
                      hardware=hardware,
                      budget=options.budget,
                      progress=progress)
    except (ConfigError, RecipeError) as exc:
        print(f"error: {in_entry_terms(exc, rest)}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        print(to_text(result, source.origin))
    if folder is not None and result.fits:
        from hyper_parallel.launch.job import quote
        from hyper_parallel.plan.write import write_jobs, write_recipes

        command = " ".join(quote(w) for w in ["python", "-m", "hyper_parallel.plan", *args])
        try:
            written = write_recipes(result, rest, source, count, folder, command,
                                    force=options.force)
            for path, name, _ in written:
                print(f"wrote {path} (--module {path} --config {name})", file=sys.stderr)
            if options.jobs is not None:
                files, problems = write_jobs(written, options.jobs, folder,
                                             options.gpus_per_node, command, options.force)
                for path in files:
                    print(f"wrote {path}", file=sys.stderr)
                for problem in problems:
                    print(f"error: {problem}", file=sys.stderr)
                if problems:
                    return 2
        except (ConfigError, RecipeError, CodegenError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0 if result.fits else 1


def _parse(rest: list[str]):
    """The training command line, as the training entry parses it (a legacy YAML converted)."""
    from hyper_parallel.train import parse_run
    from hyper_parallel.utils.errors import ConfigError

    if not rest:
        raise ConfigError("nothing to plan: give --module M --config C [overrides], or a "
                          "legacy YAML [overrides]", path="command line")
    source = parse_run(rest)
    return source, source.config


def _profile(options: argparse.Namespace):
    """``(hardware, gpu)``: the measured profile or the GPU's datasheet, and the GPU."""
    from hyper_parallel.plan import hardware as profiles
    from hyper_parallel.preflight.check import choose_gpu

    gpu = choose_gpu(options.gpu)
    if options.hardware is not None:
        return profiles.load(options.hardware), gpu
    return profiles.datasheet(gpu.name), gpu


if __name__ == "__main__":
    sys.exit(main())
