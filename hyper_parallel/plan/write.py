"""``--write K DIR``: the best K layouts as recipe modules; ``--jobs``: their job files.

Each recipe is the user's with the plan's changes, written by the run-record writer that
``--from-yaml``'s rules drive (:func:`~hyper_parallel.codegen.migration.config_recipe.
render_config_recipe`): the module starts from the user's own recipe (``from M import C``,
``config = C()``) when that module imports by name, and sets one line per field the plan (or a
command-line override) changed, in the order of ``HyperTrainer.Config``; a legacy YAML's, or a
recipe file's, starts from the baseline that leaves the fewest lines (its model's flavor or a
registry recipe). Before anything is written the module is executed and must build the planned
configuration exactly, else nothing is written. Files are written atomically with the umask's
mode; a different file already in the way is refused unless ``--force``.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyper_parallel.plan.space import label
from hyper_parallel.utils.errors import ConfigError


def _user_baseline(argv: Sequence[str]) -> Any:
    """The user's recipe as the written module's first line, when ``argv`` is a recipe command
    line whose module imports by its dotted name (from here); else None."""
    from hyper_parallel.codegen.migration.recipe.baseline import Baseline
    from hyper_parallel.config.manager import extract_module_and_config, is_recipe_command_line
    from hyper_parallel.config.recipes import load_recipe, resolve_recipe_module

    if not is_recipe_command_line(list(argv)):
        return None
    module_arg, name, _ = extract_module_and_config(list(argv))
    module = resolve_recipe_module(module_arg)
    dotted = module.__name__
    try:
        importable = importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        importable = False
    if not importable or module_arg.endswith(".py"):
        return None
    return Baseline(f"{name}()", {(dotted, name)}, load_recipe(module_arg, name),
                    f"the recipe {dotted}.{name}")


def recipe_name(argv: Sequence[str], rank: int) -> str:
    """``<the user's recipe or YAML name>_plan<rank>``, a usable function and file name."""
    from hyper_parallel.codegen.migration.recipe.render import name_problem
    from hyper_parallel.config.manager import extract_module_and_config, is_recipe_command_line

    if is_recipe_command_line(list(argv)):
        stem = extract_module_and_config(list(argv))[1]
    else:
        stem = Path(argv[0]).name.rsplit(".", 1)[0]
    name = f"{re.sub(r'[^0-9A-Za-z_]', '_', stem)}_plan{rank}"
    problem = name_problem(name)
    return problem[1] if problem else name


def write_recipes(result: Any, argv: Sequence[str], source: Any, count: int, folder: Path,
                  command: str, force: bool = False) -> list[tuple[Path, str, Any]]:
    """Write the best ``count`` fitting layouts of ``result`` into ``folder``; returns
    ``(file, recipe name, evaluated)`` of each. Every module is rendered and proven before the
    first is written."""
    from hyper_parallel.codegen.migration.config_recipe import render_config_recipe
    from hyper_parallel.codegen.migration.recipe.render import fill
    from hyper_parallel.codegen.rendering.writing import atomic_write
    from hyper_parallel.launch.plan import refuse_other

    if count < 1:
        raise ConfigError(f"{count}: give how many of the best layouts to write (>= 1)",
                          path="--write")
    best = [e for e in result.evaluated if e.fits and e.prediction is not None][:count]
    repo = Path(__file__).resolve().parents[2]
    baseline = _user_baseline(argv)
    origin = getattr(source, "origin", "the command line")
    rendered = []
    for rank, item in enumerate(best, 1):
        name = recipe_name(argv, rank)
        layout = label(item.candidate.describe(result.global_batch))
        p = item.prediction
        title = (f"Recipe {name}: plan #{rank} of {origin} on {result.nodes} node(s) x "
                 f"{result.gpus_per_node} {result.gpu.name}: {layout}.")
        about = (f"Written by ``{command}``. Preflight: {item.peak_bytes / 2**30:.1f} GiB on the "
                 f"fullest rank; predicted step {p.step_seconds:.3g} s ({p.largest_cost} the "
                 f"largest cost), {item.tokens_per_second_per_gpu:,.0f} tokens/s per GPU, MFU "
                 f"{100 * item.mfu:.1f} %, priced with the {result.hardware.name} profile. Before "
                 "writing, the planner executed this module and checked that it builds the "
                 "planned configuration exactly.")
        recipe = render_config_recipe(
            item.config, repo=repo, title=fill(title), about=fill(about),
            flags=getattr(source, "flags", ()), name=name,
            baselines=[baseline] if baseline is not None else [])
        path = folder / f"{name}.py"
        refuse_other(path, recipe.text, force, "recipe", "--force")
        rendered.append((path, name, item, recipe.text))
    written = []
    for path, name, item, text in rendered:
        atomic_write(path, text)
        written.append((path, name, item))
    return written


def write_jobs(written: list[tuple[Path, str, Any]], launch_options: str, folder: Path,
               gpus_per_node: int, command: str, force: bool = False
               ) -> tuple[list[Path], list[str]]:
    """The job file of each written recipe, by the launch package's fleet writer (the jobs are
    written, never submitted); the plan's ``--gpus-per-node`` unless the options give it."""
    import shlex

    from hyper_parallel.launch.fleet import write_jobs as fleet_jobs

    words = shlex.split(launch_options)
    if not any(w == "--gpus-per-node" or w.startswith("--gpus-per-node=") for w in words):
        launch_options = f"{launch_options} --gpus-per-node {gpus_per_node}"
    files, problems = [], []
    for path, name, item in written:
        made, bad = fleet_jobs([(name, item.report.world_size)], path, launch_options, folder,
                               command, reports={name: item.report}, force=force,
                               legacy_names=False)
        files += made
        problems += bad
    return files, problems


__all__ = ["recipe_name", "write_jobs", "write_recipes"]
