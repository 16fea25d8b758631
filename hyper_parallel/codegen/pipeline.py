"""Generate and write the generated files (:mod:`.rendering.outputs` lists them and their inputs).

``generate`` renders every output from its inputs; ``write`` writes those that differ, deletes
generated files the generator no longer produces, atomically (:mod:`.rendering.writing`);
``up_to_date`` says, from the recorded input hashes alone, that nothing would change, so that
``make codegen`` on a current tree renders nothing, runs no black and imports no torch. Checking a
tree is :mod:`.staleness`'s job.

The recipes of the example YAMLs (``examples/yaml/<x>.yaml`` -> ``recipes/<x>.py``) are generated
too, by :mod:`.migration.from_yaml` exactly as ``--from-yaml`` writes them for a user: without the
header (their module docstring names the YAML and its hash instead; what else they were converted
from is recorded locally, :mod:`.rendering.recipe_record`).

Generating never imports a generated module before rewriting it, so a broken one (conflict
markers, a truncated file) is simply regenerated; only the recipe conversion of the example
YAMLs imports them, and it is rerun in a fresh process once they are rewritten (``RERUN_ENV``).
"""

from __future__ import annotations

import os
import re
import tempfile  # noqa: F401 -- patched through this module by the writing tests
import time
from dataclasses import dataclass, field
from pathlib import Path

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.rendering import framing, recipe_record, render
from hyper_parallel.codegen.rendering.framing import MARKER
from hyper_parallel.codegen.rendering.outputs import (
    EXAMPLES,
    OUTPUTS,
    RECIPES,
    TABLE,
    Output,
    example_recipes,
    input_parts,
    model_outputs,
)
from hyper_parallel.codegen.rendering.templating import TEMPLATES, environment
from hyper_parallel.codegen.rendering.writing import (  # noqa: F401 -- current_umask: for callers
    WriteError,
    atomic_write,
    current_umask,
    read_text,
)
from hyper_parallel.codegen.table import descriptors
from hyper_parallel.codegen.table.coverage import Resolved, resolve
from hyper_parallel.codegen.table.field_table import load_table

#: Where ``write`` and ``find_generated`` look for generated files that are no longer produced.
SCAN = (("hyper_parallel", "*.py"), ("docs", "*.md"))
#: The first line of a recipe converted from an example YAML.
_EXAMPLE_RECIPE = re.compile(r'^"""Recipe \w+, converted from ' + re.escape(EXAMPLES) + r"/\S+\.yaml$")
#: Set in the fresh process that re-converts the recipes after the configuration modules changed.
RERUN_ENV = "_HYPER_PARALLEL_CODEGEN_RERUN"


@dataclass
class Generation:
    """The generated files (``{path: text}``) and how long black took."""

    files: dict[str, str]
    black_seconds: float = 0.0
    parts: dict[str, dict[str, str]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # path -> its main input
    recipes_seconds: float = 0.0
    """Time spent converting the example YAMLs into their recipes (imports torch)."""
    modules: list[str] = field(default_factory=list)
    """The generated Python modules the recipe conversion imports (every Python output but the
    recipes): when one of them changes, the recipes are converted again in a fresh process."""
    unverified: dict[str, str] = field(default_factory=dict)
    """Recipes whose conversion failed while those modules were stale (path -> the error):
    neither written nor deleted; the fresh-process rerun converts them."""
    recipe_record: str | None = None
    """What the recipes were converted from (:mod:`.rendering.recipe_record`), when this process converted
    them with the configuration modules it writes; ``write`` saves it."""


def _checked(repo: Path) -> tuple[Resolved, tuple[Output, ...]]:
    """The table and the model descriptors, loaded and checked, and every headed output."""
    table = load_table(repo / TABLE, TABLE)
    resolved = resolve(table, repo)
    models = descriptors.load_descriptors(repo, resolved)
    return resolved, OUTPUTS + model_outputs(models)


def _render(out: Output, env, resolved: Resolved, timer: render.Timer) -> str:
    try:
        text = env.get_template(out.template).render(**out.context(resolved))
    except Exception as exc:  # jinja2 errors carry the template line
        raise CodegenError(f"{TEMPLATES}/{out.template}: rendering failed: {exc}") from exc
    try:
        return framing.formatted(text, out.python, timer)
    except Exception as exc:
        raise CodegenError(
            f"{TEMPLATES}/{out.template}: the rendered {out.path} is not valid Python "
            f"({exc}); fix the template or the table"
        ) from exc


def generate(repo: Path) -> Generation:
    """Load and check the table and the model descriptors, render every output; writes
    nothing."""
    repo = Path(repo).resolve()
    resolved, outs = _checked(repo)
    env = environment(repo)
    timer = render.Timer()
    black = render.black_version()
    files: dict[str, str] = {}
    all_parts: dict[str, dict[str, str]] = {}
    sources: dict[str, str] = {}
    for out in outs:
        parts = input_parts(out, repo, resolved, black)
        files[out.path] = framing.with_header(_render(out, env, resolved, timer), out.python,
                                              out.source, out.inputs(repo, black), parts)
        all_parts[out.path] = parts
        sources[out.path] = out.source
    start = time.perf_counter()
    # Nothing above imported a generated module (the table, the descriptors and the classes
    # they describe are read; the outputs are rendered from them), so a broken generated file --
    # conflict markers, truncation -- is simply rewritten. The recipes are converted with the
    # configuration modules this process imports: when this run rewrites one of them, a
    # conversion may fail only because the imported ones are stale (or broken). Such a recipe
    # is left as it is (unverified); the fresh-process rerun (__main__) converts it.
    modules = [o.path for o in outs if o.python]
    stale_modules = any(read_text(repo / rel) != files[rel] for rel in modules)
    unverified: dict[str, str] = {}
    recipes = example_recipes(repo)
    for rel, yaml_rel in recipes.items():
        try:
            files[rel] = _example_recipe(repo, rel, yaml_rel)
        except Exception as exc:
            if not stale_modules or os.environ.get(RERUN_ENV):
                raise
            files[rel] = read_text(repo / rel) or ""
            unverified[rel] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        sources[rel] = yaml_rel
        all_parts[rel] = {"yaml": framing.sha((repo / yaml_rel).read_bytes())}
    record = None
    if recipes and not stale_modules:
        # Converted with the very modules on disk: the record may say so.
        record = recipe_record.snapshot(repo, {rel: files[rel] for rel in recipes}, recipes,
                                        black)
    return Generation(files, timer.black_seconds, all_parts, sources,
                      recipes_seconds=time.perf_counter() - start, modules=modules,
                      unverified=unverified, recipe_record=record)


def up_to_date(repo: Path) -> int | None:
    """The number of generated files when every one of them is current, judged from the input
    hashes recorded in the headers (and, for the example recipes, :mod:`.rendering.recipe_record`)
    without rendering anything; None when anything may differ (or no record says). The table
    and the descriptors are loaded and checked all the same: a broken one is still an error."""
    repo = Path(repo).resolve()
    resolved, outs = _checked(repo)
    black = render.black_version()
    for out in outs:
        text = read_text(repo / out.path)
        expected = framing.inputs_sha(input_parts(out, repo, resolved, black))
        if text is None or framing.recorded_inputs(text) != (expected, True):
            return None
    recipes = example_recipes(repo)
    if recipes and not recipe_record.current(repo, recipes, black):
        return None
    produced = {out.path for out in outs} | set(recipes)
    if set(find_generated(repo)) != produced:
        return None
    return len(produced)


def _example_recipe(repo: Path, rel: str, yaml_rel: str) -> str:
    """The recipe ``--from-yaml <yaml_rel>`` writes, run from the repository root."""
    from hyper_parallel.codegen.migration import from_yaml
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.trainer.config import ConfigError

    try:
        recipe, _ = from_yaml.convert(repo / yaml_rel, output=repo / rel, repo=repo, base=repo)
    except (ConfigError, RecipeError) as exc:
        raise CodegenError(f"{yaml_rel} (an example YAML; its recipe is {rel}): {exc}") from None
    return recipe.text


def _first_line(path: Path) -> str | None:
    """The first line of a text file (without its newline); None when it cannot be read."""
    try:
        with path.open(encoding="utf-8") as handle:
            return handle.readline().rstrip("\n")
    except (OSError, UnicodeDecodeError):
        return None


def find_generated(repo: Path) -> list[str]:
    """Repo-relative paths of every file whose first line carries the generated marker, and of
    every recipe converted from an example YAML."""
    found = []
    for directory, pattern in SCAN:
        for path in sorted((repo / directory).rglob(pattern)):
            if MARKER in (_first_line(path) or ""):
                found.append(path.relative_to(repo).as_posix())
    for path in sorted((repo / RECIPES).glob("*.py")):
        # Only recipes of example YAMLs: a user's own converted recipes are theirs.
        if _EXAMPLE_RECIPE.match(_first_line(path) or ""):
            found.append(path.relative_to(repo).as_posix())
    return found


def write(repo: Path, generation: Generation, out_root: Path | None = None) -> list[str]:
    """Write the files that differ (under ``out_root``, default the repo) and delete extra
    generated files in the repo; returns the paths changed."""
    repo = Path(repo).resolve()
    target = Path(out_root).resolve() if out_root is not None else repo
    changed = []
    for rel, text in generation.files.items():
        if rel in generation.unverified:
            continue  # left as it is; the fresh-process rerun converts it
        path = target / rel
        if path.is_file() and read_text(path) == text:
            continue
        atomic_write(path, text)
        changed.append(rel)
    if out_root is None and generation.recipe_record is not None:
        atomic_write(repo / recipe_record.RECORD, generation.recipe_record)
    if out_root is None:
        for rel in find_generated(repo):
            if rel not in generation.files:
                (repo / rel).unlink()
                changed.append(rel)
    return changed
