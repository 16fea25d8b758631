"""One engine: a YAML and its converted recipe are the same run, and a converted recipe is a
new-world recipe.

* A checkpoint written through either entry resumes through the other and continues with
  bit-identical losses: 3 steps through one entry, the next 3 through the other, against 6
  straight steps (the resumed steps need the model, the optimizer, the LR schedule and the
  data position of the checkpoint).
* The recipe ``--from-yaml`` wrote for the debug YAML accepts the new-only fields: keep the
  latest checkpoint only, fused AdamW, outputs under ``--dump_folder``, torch.compile.
* The engine never imports the legacy schema (only the front doors do).

The runs are the debug YAML and its recipe on the tiny flavor (the same override in each world),
each a real command line of the legacy entry script (which takes both), one rank.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.torchrun import REPO, run_python

from .conftest import EXAMPLES, TRAIN_SCRIPT, read_metrics

YAML = EXAMPLES / "train_qwen3_5_debug.yaml"
RECIPE = ("--module", "recipes.train_qwen3_5_debug", "--config", "train_qwen3_5_debug")
#: The legacy side derives its warmup from the step count, ceil(6 x 0.2) = 2: the recipe's own
#: 2 warmup steps, so the two entries run the same schedule.
STEPS = 6
SAVE = STEPS // 2  # the checkpoint the second entry resumes from
FAULT = {"HYPER_PARALLEL_FAULT_INJECT": f"exit_at_step:{SAVE + 1}"}


def legacy(out: Path, *extra: str, env: dict | None = None, check: bool = True):
    args = [str(YAML), "--model.config_overrides.flavor=tiny",
            f"--train.checkpoint.output_dir={out}", f"--train.max_steps={STEPS}",
            f"--train.checkpoint.save_steps={SAVE}", "--train.logging.log_steps=1", *extra]
    return run_python(TRAIN_SCRIPT, args, env=env, check=check, timeout=300)


def recipe(out: Path, *extra: str, env: dict | None = None, check: bool = True):
    args = [*RECIPE, "--model.config_overrides={flavor: tiny}", f"--checkpoint.folder={out}",
            f"--training.steps={STEPS}",
            f"--checkpoint.interval={SAVE}", "--metrics.log_freq=1", *extra]
    return run_python(TRAIN_SCRIPT, args, env=env, check=check, timeout=300)


def losses(out: Path) -> dict[int, float]:
    """``{step: loss}``; a resumed run appends, so the last record of a step wins."""
    return {r["step"]: r["loss"] for r in read_metrics(out) if "loss" in r}


def _straight(out: Path) -> dict[int, float]:
    recipe(out)
    return losses(out)


@pytest.fixture(scope="module")
def straight(run_once) -> dict[int, float]:
    """The uninterrupted run, once per session (the two resume tests may land on different
    xdist workers)."""
    record = run_once.get(("one engine straight", STEPS), _straight)
    return {int(step): loss for step, loss in record.items()}  # JSON keys are strings


@pytest.mark.slow
@pytest.mark.parametrize("first, second", [(legacy, recipe), (recipe, legacy)],
                         ids=["yaml then recipe", "recipe then yaml"])
def test_a_checkpoint_resumes_through_the_other_entry(first, second, straight, tmp_path):
    out = tmp_path / "run"
    proc = first(out, env=FAULT, check=False)
    assert (proc.returncode != 0 and (out / f"step_{SAVE}").is_dir()
            and not (out / f"step_{STEPS}").exists())
    load = ("--checkpoint.load_path" if second is recipe else "--train.checkpoint.load_path")
    second(out, f"{load}={out / f'step_{SAVE}'}")
    resumed = losses(out)
    assert sorted(resumed) == list(range(1, STEPS + 1))
    assert resumed == straight  # bit for bit, the first steps and the resumed ones


@pytest.mark.slow
def test_a_converted_recipe_takes_the_new_only_fields(tmp_path):
    dump = tmp_path / "dump"
    # Three steps, a checkpoint after each: keep_latest_k=1 has two older ones to delete.
    recipe(Path("ckpt"), "--training.steps=3", "--checkpoint.interval=1",
           "--checkpoint.keep_latest_k=1", "--optimizer.fused=True", f"--dump_folder={dump}")
    steps = sorted(p.name for p in (dump / "ckpt").iterdir() if p.name.startswith("step_"))
    assert steps == ["step_3"]  # keep_latest_k=1 under dump_folder
    assert sorted(losses(dump / "ckpt")) == [1, 2, 3]


@pytest.mark.slow
def test_a_converted_recipe_compiles(tmp_path):
    """``compile.enable`` on a converted recipe: every decoder layer through TorchDynamo, with
    the ``eager`` backend -- the recipe's fields reach ``torch.compile``; what inductor makes of
    the layers (its C++ build is most of a minute here) is test_qwen3_5_v2's inductor test."""
    out = tmp_path / "compiled"
    proc = recipe(out, "--training.steps=2", "--compile.enable", "--compile.backend=eager")
    assert "compile=eager" in proc.stdout + proc.stderr
    assert sorted(losses(out)) == [1, 2]


def test_the_engine_never_imports_the_legacy_schema():
    code = (
        "import sys\n"
        "import hyper_parallel.trainer.hyper_trainer, hyper_parallel.models.qwen3_5\n"
        "import hyper_parallel.models.qwen3_5_v2, hyper_parallel.components\n"
        "legacy = ('hyper_parallel.trainer.config', 'hyper_parallel.trainer.config_parser',\n"
        "          'hyper_parallel.config.legacy_adapter', 'hyper_parallel.trainer.llm_trainer')\n"
        "print(sorted(m for m in legacy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         check=True).stdout
    assert json.loads(out.strip().replace("'", '"')) == []
