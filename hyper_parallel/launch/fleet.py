"""One job per recipe of a converted fleet: ``codegen --from-yaml DIR --jobs "LAUNCH OPTIONS"``.

The launch options are :mod:`hyper_parallel.launch`'s own (``--scheduler slurm --gpus-per-node
8 --time 24:00:00``), given once for the fleet; each recipe's node count comes from its degrees
(or from the launch command a YAML was pasted with, for a degree of -1). The jobs are written,
never submitted: a fleet is reviewed before it is queued. A recipe whose job cannot be made (its
degrees do not fill whole nodes) is named with the reason; the others are still written.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyper_parallel.utils.errors import ConfigError

#: Launch options that make no sense for a fleet's jobs (each job has its own file, none is
#: submitted).
_PER_JOB = ("-o", "--output", "--name", "--dry-run", "--recipe-output")


def write_jobs(recipes: Sequence[tuple[str, int | None]], module: Path, launch_options: str,
               folder: Path, command: str, reports: dict[str, Any] | None = None,
               force: bool = False, legacy_names: bool = True) -> tuple[list[Path], list[str]]:
    """Write the job of each ``(recipe name, the world its launch command gives or None)`` of
    the registry ``module`` into ``folder``; returns the files written and the problems (one
    line each, naming the recipe). ``reports``: preflights by recipe name (the fleet's own),
    shown in each job's header. ``legacy_names``: the recipes come from legacy YAMLs, so their
    problems name the YAMLs' keys (``train.accelerator.dp_shard``)."""
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.launch.options import options, request_of
    from hyper_parallel.launch.plan import EXTENSIONS, plan_job, refuse_other, render, write_job

    words = shlex.split(launch_options)
    stray = [w for w in words if w.split("=", 1)[0] in _PER_JOB]
    if stray:
        raise ConfigError(f"{', '.join(stray)} is per job; the fleet's jobs are named after their "
                          "recipes, written into --jobs-dir and not submitted", path="--jobs")
    try:
        parsed, rest = options().parse_known_args(words)
    except SystemExit:
        raise ConfigError(f"{launch_options!r} are not launch options (python -m "
                          "hyper_parallel.launch --help)", path="--jobs") from None
    if rest:
        raise ConfigError(f"{' '.join(rest)}: not a launch option; a fleet's training settings "
                          "are in its YAMLs", path="--jobs")
    base = request_of(parsed, command)
    base.preflight = False
    workdir = Path(base.workdir or os.getcwd()).resolve()
    shown_module = os.path.relpath(module.resolve(), workdir)
    written, problems = [], []
    for name, world in recipes:
        request = dataclasses.replace(base, name=name)
        if request.nodes is None and world and world % request.gpus_per_node == 0:
            request.nodes = world // request.gpus_per_node
        try:
            plan = plan_job(["--module", shown_module, "--config", name], request,
                            report=(reports or {}).get(name))
            path = folder / f"{plan.job.name}.{EXTENSIONS[plan.job.scheduler]}"
            text = render(plan.job)
            refuse_other(path, text, force, "job", "--jobs-dir")
            write_job(path, text)
        except ConfigError as exc:
            problems.append(f"{name}: {_legacy(exc) if legacy_names else exc}")
            continue
        except RecipeError as exc:
            problems.append(f"{name}: {exc}")
            continue
        written.append(path)
    return written, problems


def _legacy(error: ConfigError) -> ConfigError:
    from hyper_parallel.trainer.llm_trainer import legacy_config_error

    return legacy_config_error(error)


__all__ = ["write_jobs"]
