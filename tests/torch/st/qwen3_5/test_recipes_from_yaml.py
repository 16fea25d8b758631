"""A converted recipe trains exactly like the YAML it came from.

For every example YAML that fits on 1 or 2 CPU ranks, the YAML through ``LLMTrainer`` and the
module ``python -m hyper_parallel.codegen --from-yaml`` wrote for it (``recipes/<name>.py``,
``--module recipes.<name> --config <name>``, HyperTrainer) must train the same run, for the
YAML's whole step count -- the LR schedule (warmup = max_steps x ratio, decay horizon) is
derived from it, and a shortened run would not test the schedule the converter wrote.

``LLMTrainer(args)`` is ``HyperTrainer(legacy_to_trainer_config(args))``: the two entries differ
only in the ``HyperTrainer.Config`` they hand the engine, so the recipe is the YAML's run exactly
when that configuration is the same, which :func:`engine_view` compares leaf by leaf (every field
of the tree and the model spec the engine resolves from it, the model's architecture included;
``repr`` for repr, so ``1`` and ``1.0`` differ), on the shipped command line and on the tiny
flavor. The YAML itself trains on the layout it states, every step of its schedule: the tp2 YAML
as shipped (the debug model; the golden run of test_legacy_training, one run for both modules),
the others on the tiny flavor (``model.config_overrides.flavor``), its evaluation and
checkpoints included. The debug YAML trains through both entries as well, on one rank, every
step's loss and gradient norm bit for bit: the end-to-end witness that the same configuration
is the same run.

The CPU-sized recipes of the registry (``--module qwen3_5_v2``) train here too, in the same
jobs: 3 steps with a checkpoint on the layout each states, the layouts agreeing.

The training tests are ``slow`` (multi-rank jobs); the configuration checks run in the test
process, in a fraction of a second each.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.helpers.layout import Case, Layout, assert_same_run
from tests.helpers.torchrun import REPO

from .conftest import EXAMPLES
from .test_legacy_training import FSDP2_TINY, GOLDEN_RUNS, GRAD_NORM_RTOL, LAYOUT_RTOL

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
#: The YAML runs that are test_legacy_training's cases too (made once for both modules): the
#: tp2 YAML as shipped is a golden case; the fsdp2 YAML on the tiny flavor is compared there
#: with the legacy trainer's accumulation. The other YAMLs run on the tiny flavor.
SHARED = {"train_qwen3_5_tp2": GOLDEN_RUNS["train_qwen3_5_tp2"],
          "train_qwen3_5_fsdp2": FSDP2_TINY["train_qwen3_5_fsdp2 YAML"]}
#: The YAMLs whose recipe trains here too (the witness: one rank, the tiny flavor).
TRAINED_BOTH = ("train_qwen3_5_debug",)

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


def command_lines(name: str, folder: Path, *, tiny: bool) -> dict[str, list[str]]:
    """The YAML's and its recipe's command lines (the same output folder, the flavor override
    in each world's spelling)."""
    flavor = {world: [override] if tiny else [] for world, override in TINY.items()}
    return {"legacy": [str(EXAMPLES / f"{name}.yaml"), *flavor["legacy"],
                       f"--train.checkpoint.output_dir={folder}"],
            "recipe": ["--module", f"recipes.{name}", "--config", name, *flavor["recipe"],
                       f"--checkpoint.folder={folder}"]}


def engine_view(argv: list[str]) -> dict[str, str]:
    """What the engine trains from a command line, flat (``{field: repr}``,
    :func:`~hyper_parallel.trainer.config_identity.flatten`): every field of the
    ``HyperTrainer.Config`` the entry builds but ``model_spec`` (a recipe states it, a YAML
    leaves it to ``model.name``; the engine reads it only to resolve the spec), and, under
    ``engine spec.``, the spec ``HyperTrainer._resolve_spec`` resolves from it: the model
    Config updated by the run (the architecture), the build, parallelize, pipelining,
    clipping and state-dict functions. Nothing is built."""
    from hyper_parallel.train import parse_run
    from hyper_parallel.trainer.config_identity import flatten
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = parse_run(argv).config
    engine = object.__new__(HyperTrainer)  # the engine's own resolution, without a build
    engine.config = config
    engine._resolve_spec()
    view = {k: v for k, v in flatten(config).items() if k.split(".", 1)[0] != "model_spec"}
    view.update(flatten(engine.spec, "engine spec."))
    return view


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_recipe_hands_the_engine_the_yaml_s_configuration(name, tmp_path, monkeypatch):
    """The recipe's configuration is the YAML's, leaf by leaf, as shipped and on the tiny
    flavor: the same run (see the module doc)."""
    monkeypatch.syspath_prepend(str(REPO))  # recipes/ is imported from the repository
    for tiny in (False, True):
        argv = command_lines(name, tmp_path / "out", tiny=tiny)
        legacy, recipe = engine_view(argv["legacy"]), engine_view(argv["recipe"])
        assert len(legacy) > 100 and "engine spec.model.layer_types" in legacy, sorted(legacy)
        differ = {k: (legacy.get(k), recipe.get(k)) for k in sorted(set(legacy) | set(recipe))
                  if legacy.get(k) != recipe.get(k)}
        assert differ == {}, (name, "tiny" if tiny else "shipped", differ)


@pytest.fixture(scope="module")
def runs(layouts) -> dict:
    """``{(name, "legacy" | "recipe" | "registry"): LayoutRun}``: one job per world size (the
    :data:`SHARED` runs are test_legacy_training's cases, made once for both modules)."""
    cases = {
        (name, "registry"): Case(("--module", "qwen3_5_v2", "--config", name,
                                  "--training.steps=3", "--checkpoint.interval=3"), layout,
                                 argv_sets_layout=True)
        for name, layout in CPU_RECIPES.items()
    }
    for name, layout in LAYOUTS.items():
        cases[name, "legacy"] = SHARED.get(name) or Case(
            (str(EXAMPLES / f"{name}.yaml"), TINY["legacy"]), layout, argv_sets_layout=True)
        if name in TRAINED_BOTH:
            cases[name, "recipe"] = Case(("--module", f"recipes.{name}", "--config", name,
                                          TINY["recipe"]), layout, argv_sets_layout=True)
    return layouts.run_cases(cases, params=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_step_bit_identical(name, runs):
    """The YAML trains every step of its schedule on its layout; where the recipe trains too,
    every step's loss and gradient norm is the YAML's, bit for bit."""
    legacy = runs[name, "legacy"]
    assert legacy.error is None, legacy.error
    max_steps = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())["train"]["max_steps"]
    assert legacy.steps == list(range(1, max_steps + 1)), (name, legacy.steps)
    if name in TRAINED_BOTH:
        assert_same_run(runs[name, "recipe"], legacy, rtol=0)  # losses and norms, bit for bit


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CPU_RECIPES))
def test_cpu_registry_recipe_trains_and_agrees(name, runs):
    run, reference = runs[name, "registry"], runs["qwen3_5_v2_debugmodel", "registry"]
    assert run.steps == [1, 2, 3]
    assert (run.checkpoint_folder / "step_3").is_dir()
    assert_same_run(run, reference, rtol=LAYOUT_RTOL, grad_norm_rtol=GRAD_NORM_RTOL)
