"""A converted recipe trains exactly like the YAML it came from.

For every example YAML that fits on 1 or 2 CPU ranks, the YAML through ``LLMTrainer`` and the
module ``python -m hyper_parallel.codegen --from-yaml`` wrote for it (``recipes/<name>.py``,
``--module recipes.<name> --config <name>``, HyperTrainer) must train the same run: every
step's loss and gradient norm bit for bit, for the YAML's whole step count -- the LR schedule
(warmup = max_steps x ratio, decay horizon) is derived from it, and a shortened run would not
test the schedule the converter wrote.

Both sides run on the tiny flavor (``model.config_overrides.flavor``, the same override in each
world), on the layout the YAML states: the conversion rows, the schedule, accumulation,
evaluation and checkpoints are the YAML's, at a small part of the debug model's cost. The
shipped debug-model runs of these YAMLs are pinned by test_legacy_training's golden files.

The CPU-sized recipes of the registry (``--module qwen3_5_v2``) train here too, in the same
jobs: 3 steps with a checkpoint on the layout each states, the layouts agreeing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.helpers.layout import Case, Layout, assert_same_run
from tests.helpers.torchrun import REPO

from .conftest import EXAMPLES
from .test_legacy_training import GRAD_NORM_RTOL, LAYOUT_RTOL

pytestmark = pytest.mark.slow

RECIPES = REPO / "recipes"
#: Example YAMLs compared here and the layout each states (its header's ``--nproc_per_node``
#: ranks).
LAYOUTS = {
    "train_qwen3_5_debug": Layout(),
    "train_qwen3_5_fsdp2": Layout(dp_shard=2),
    "train_qwen3_5_tp2": Layout(tp=2),
    "train_qwen3_5_demo": Layout(dp_shard=2),
}
#: The CI machine has two cores; YAMLs that need more ranks are not run here.
MAX_NPROC = 2
TINY = {"legacy": "--model.config_overrides.flavor=tiny",
        "recipe": "--model.config_overrides={flavor: tiny}"}

_HEADER_NPROC = re.compile(r"^#.*--nproc_per_node[ =](\d+)", re.MULTILINE)


def header_nproc(yaml_path: Path) -> int:
    """The rank count the YAML's header comment launches it with."""
    match = _HEADER_NPROC.search(yaml_path.read_text())
    assert match, (f"{yaml_path}: no '#   torchrun --nproc_per_node N ...' line in the header "
                   "comment; add one so the tests know how many ranks it needs")
    return int(match.group(1))


def test_table_covers_every_small_example_yaml():
    """A new example YAML that fits on <= 2 ranks must be added to LAYOUTS (with its layout)."""
    small = {p.stem: n for p in sorted(EXAMPLES.glob("*.yaml"))
             if (n := header_nproc(p)) <= MAX_NPROC}
    listed = {name: layout.world_size for name, layout in LAYOUTS.items()}
    assert listed == small, (
        f"LAYOUTS in {Path(__file__).name} must list every examples/yaml/*.yaml that runs on "
        f"<= {MAX_NPROC} ranks with its header's --nproc_per_node ranks; expected {small}")
    missing = [name for name in LAYOUTS if not (RECIPES / f"{name}.py").is_file()]
    assert not missing, (f"no recipes/<name>.py for {missing}; write it with "
                         "python -m hyper_parallel.codegen --from-yaml examples/yaml/<name>.yaml")


#: The CPU-sized recipes of the registry (the debug model), trained for real for 3 steps with a
#: checkpoint, each on the layout it states; they agree with each other within the layout
#: bounds of test_legacy_training.
CPU_RECIPES = {
    "qwen3_5_v2_debugmodel": Layout(),
    "qwen3_5_v2_debugmodel_fsdp2": Layout(dp_shard=2),
    "qwen3_5_v2_debugmodel_tp2": Layout(tp=2),
}


@pytest.fixture(scope="module")
def runs(layouts) -> dict:
    """``{(name, "legacy" | "recipe" | "registry"): LayoutRun}``: one job per world size."""
    cases = {
        (name, "registry"): Case(("--module", "qwen3_5_v2", "--config", name,
                                  "--training.steps=3", "--checkpoint.interval=3"), layout,
                                 argv_sets_layout=True)
        for name, layout in CPU_RECIPES.items()
    }
    for name, layout in LAYOUTS.items():
        cases[name, "legacy"] = Case((str(EXAMPLES / f"{name}.yaml"), TINY["legacy"]), layout,
                                     argv_sets_layout=True)
        cases[name, "recipe"] = Case(("--module", f"recipes.{name}", "--config", name,
                                      TINY["recipe"]), layout, argv_sets_layout=True)
    return layouts.run_cases(cases, params=False)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_step_bit_identical(name, runs):
    legacy, recipe = runs[name, "legacy"], runs[name, "recipe"]
    max_steps = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())["train"]["max_steps"]
    assert legacy.steps == list(range(1, max_steps + 1)), (name, legacy.steps)
    assert_same_run(recipe, legacy, rtol=0)  # losses and gradient norms, bit for bit


@pytest.mark.parametrize("name", sorted(CPU_RECIPES))
def test_cpu_registry_recipe_trains_and_agrees(name, runs):
    run, reference = runs[name, "registry"], runs["qwen3_5_v2_debugmodel", "registry"]
    assert run.steps == [1, 2, 3]
    assert (run.checkpoint_folder / "step_3").is_dir()
    assert_same_run(run, reference, rtol=LAYOUT_RTOL, grad_norm_rtol=GRAD_NORM_RTOL)
