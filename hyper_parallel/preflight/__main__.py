"""Will this run fit the cluster it names? Answered on one CPU machine, before the launch.

    python -m hyper_parallel.preflight --module M --config C [--a.b=c ...] [options]
    python -m hyper_parallel.preflight old.yaml [--train.x=...] [options]

Options: ``--gpu NAME`` (``a100-80gb``, ``h100-80gb``, ``h100-96gb``, ``h200``, ``b200``;
default ``h100-80gb``) or ``--gpu-memory GiB``; ``--world N`` (default: the product of the
run's parallel degrees); ``--imbalance F`` (the busiest expert-parallel rank's routed tokens over
its balanced share, default 1.25); ``--no-suggest``; ``--json`` (one object on stdout).

Exit status: 0 when every rank role fits (``fits`` or ``tight``), 1 when one does not or fails
to build at this size, 2 on a configuration error (named in the command line's own fields; a
legacy YAML's problems in its keys, each at its ``file:line`` or override, as ``python -m
hyper_parallel.codegen --from-yaml old.yaml --preflight`` names them)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")


def _options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hyper_parallel.preflight",
                                     allow_abbrev=False, add_help=False)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--gpu", default=None)
    group.add_argument("--gpu-memory", type=float, default=None)
    parser.add_argument("--world", type=int, default=None)
    parser.add_argument("--imbalance", type=float, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-suggest", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.preflight.check import run_preflight
    from hyper_parallel.utils.errors import ConfigError
    from hyper_parallel.utils.tool_options import tool_args, tool_options

    parsed = tool_options(_options(), __doc__, tool_args(argv))
    if isinstance(parsed, int):
        return parsed
    options, rest = parsed
    try:
        result = run_preflight(rest, gpu=options.gpu, gpu_memory=options.gpu_memory,
                               world=options.world, imbalance=options.imbalance,
                               suggest=not options.no_suggest)
    except (ConfigError, RecipeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps(result.json, indent=2))
    else:
        print(result.text)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
