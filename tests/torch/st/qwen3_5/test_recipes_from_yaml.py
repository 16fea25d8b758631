"""A converted recipe trains exactly like the YAML it came from.

For every example YAML that fits on 1 or 2 CPU ranks, ``torchrun scripts/train_lm.py the.yaml``
(LLMTrainer) and ``torchrun -m hyper_parallel.train --module recipes.<name> --config <name>``
(HyperTrainer, on the module ``python -m hyper_parallel.codegen --from-yaml`` wrote) must log the
same losses bit for bit. Only output locations and the log frequency are redirected; the step
count stays the YAML's, because the LR schedule (warmup = max_steps x ratio, decay horizon) is
derived from it and a shortened run would not test the schedule the converter wrote.

The legacy side goes through ``cached_train`` with the golden tests' key, so a session that also
runs test_legacy_training.py pays for those runs once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.helpers.torchrun import REPO, torchrun

from .conftest import EXAMPLES, read_metrics

pytestmark = pytest.mark.slow

RECIPES = REPO / "recipes"
#: Example YAMLs compared here and the rank count each needs (its header's ``--nproc_per_node``).
NPROC = {
    "train_qwen3_5_debug": 1,
    "train_qwen3_5_fsdp2": 2,
    "train_qwen3_5_tp2": 2,
    "train_qwen3_5_demo": 2,
}
#: The CI machine has two cores; YAMLs that need more ranks are not run here.
MAX_NPROC = 2
FIRST_STEPS = 10
TIMEOUT = 300

_HEADER_NPROC = re.compile(r"^#.*--nproc_per_node[ =](\d+)", re.MULTILINE)


def header_nproc(yaml_path: Path) -> int:
    """The rank count the YAML's header comment launches it with."""
    match = _HEADER_NPROC.search(yaml_path.read_text())
    assert match, (f"{yaml_path}: no '#   torchrun --nproc_per_node N ...' line in the header "
                   "comment; add one so the tests know how many ranks it needs")
    return int(match.group(1))


def test_table_covers_every_small_example_yaml():
    """A new example YAML that fits on <= 2 ranks must be added to NPROC (with its rank count)."""
    small = {p.stem: n for p in sorted(EXAMPLES.glob("*.yaml"))
             if (n := header_nproc(p)) <= MAX_NPROC}
    assert NPROC == small, (
        f"NPROC in {Path(__file__).name} must list every examples/yaml/*.yaml that runs on "
        f"<= {MAX_NPROC} ranks with its header's --nproc_per_node; expected {small}")
    missing = [name for name in NPROC if not (RECIPES / f"{name}.py").is_file()]
    assert not missing, (f"no recipes/<name>.py for {missing}; write it with "
                         "python -m hyper_parallel.codegen --from-yaml examples/yaml/<name>.yaml")


def losses_by_step(records: list[dict]) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in records if "loss" in r]


@pytest.fixture(scope="module")
def recipe_run(run_once):
    """``recipe_run(name)`` -> [(step, loss)] of the recipe, one torchrun per name and session
    (the demo's two tests may land on different xdist workers)."""

    def make(name: str, out: Path) -> list:
        args = ["--module", f"recipes.{name}", "--config", name,
                f"--checkpoint.folder={out}", "--metrics.log_freq=1"]
        # check=True: a failed run fails here with its stdout/stderr tail.
        torchrun("hyper_parallel.train", args, nproc=NPROC[name], module=True, timeout=TIMEOUT)
        return losses_by_step(read_metrics(out))

    def run(name: str) -> list[tuple[int, float]]:
        pairs = run_once.get(("recipe", name, NPROC[name]), lambda out: make(name, out))
        return [tuple(pair) for pair in pairs]

    return run


def legacy_run(cached_train, name: str) -> list[tuple[int, float]]:
    """The legacy run under the golden tests' cache key (yaml, no overrides, nproc)."""
    run = cached_train(f"{name}.yaml", nproc=NPROC[name])
    return losses_by_step(read_metrics(run.output_dir))


def assert_bit_identical(name: str, legacy: list, recipe: list, steps: int | None) -> None:
    """Exact float equality over the first ``steps`` logged steps (all of them with None)."""
    need = FIRST_STEPS if steps is None else steps
    for label, seq in (("legacy", legacy), ("recipe", recipe)):
        assert len(seq) >= need, f"{name}: the {label} run logged {len(seq)} steps, need {need}"
    a, b = (legacy, recipe) if steps is None else (legacy[:steps], recipe[:steps])
    assert [s for s, _ in a] == [s for s, _ in b], (name, "logged steps differ", a, b)
    for (step, x), (_, y) in zip(a, b):
        assert x == y, (f"{name}: losses differ first at step {step}: legacy {x!r} vs recipe "
                        f"{y!r} (legacy {[v for _, v in a]}, recipe {[v for _, v in b]})")
    assert len(a) == len(b), f"{name}: legacy logged {len(a)} steps, recipe {len(b)}"


@pytest.mark.parametrize("name", sorted(NPROC))
def test_first_steps_bit_identical(name, cached_train, recipe_run):
    assert_bit_identical(name, legacy_run(cached_train, name), recipe_run(name), FIRST_STEPS)


def test_demo_every_step_bit_identical(cached_train, recipe_run):
    """The demo runs 20 steps: the whole warmup + cosine schedule must match, not only 10."""
    name = "train_qwen3_5_demo"
    max_steps = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())["train"]["max_steps"]
    legacy, recipe = legacy_run(cached_train, name), recipe_run(name)
    assert len(legacy) == max_steps, f"{name}: legacy logged {len(legacy)} of {max_steps} steps"
    assert_bit_identical(name, legacy, recipe, None)
