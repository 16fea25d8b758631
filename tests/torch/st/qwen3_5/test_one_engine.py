"""One engine: a YAML and its converted recipe are the same run, and a converted recipe is a
new-world recipe.

* A checkpoint written through either entry resumes through the other and continues with
  bit-identical losses: 4 steps through one entry, the next 4 through the other, against 8
  straight steps.
* The recipe ``--from-yaml`` wrote for the debug YAML accepts the new-only fields: keep the
  latest checkpoint only, fused AdamW, outputs under ``--dump_folder``, torch.compile.
* The engine never imports the legacy schema (only the front doors do).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.torchrun import REPO, torchrun

from .conftest import EXAMPLES, TRAIN_SCRIPT, read_metrics

YAML = EXAMPLES / "train_qwen3_5_debug.yaml"
RECIPE = ("--module", "recipes.train_qwen3_5_debug", "--config", "train_qwen3_5_debug")
FAULT = {"HYPER_PARALLEL_FAULT_INJECT": "exit_at_step:5"}
STEPS = 8


def legacy(out: Path, *extra: str, env: dict | None = None, check: bool = True):
    args = [str(YAML), f"--train.checkpoint.output_dir={out}", f"--train.max_steps={STEPS}",
            "--train.checkpoint.save_steps=4", "--train.logging.log_steps=1", *extra]
    return torchrun(TRAIN_SCRIPT, args, nproc=1, env=env, check=check, timeout=300)


def recipe(out: Path, *extra: str, env: dict | None = None, check: bool = True):
    args = [*RECIPE, f"--checkpoint.folder={out}", f"--training.steps={STEPS}",
            "--checkpoint.interval=4", "--metrics.log_freq=1", *extra]
    return torchrun("hyper_parallel.train", args, nproc=1, module=True, env=env, check=check,
                    timeout=300)


def losses(out: Path) -> dict[int, float]:
    """``{step: loss}``; a resumed run appends, so the last record of a step wins."""
    return {r["step"]: r["loss"] for r in read_metrics(out) if "loss" in r}


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> dict[int, float]:
    out = tmp_path_factory.mktemp("straight")
    recipe(out)
    return losses(out)


@pytest.mark.slow
@pytest.mark.parametrize("first, second", [(legacy, recipe), (recipe, legacy)],
                         ids=["yaml then recipe", "recipe then yaml"])
def test_a_checkpoint_resumes_through_the_other_entry(first, second, straight, tmp_path):
    out = tmp_path / "run"
    proc = first(out, env=FAULT, check=False)
    assert proc.returncode != 0 and (out / "step_4").is_dir() and not (out / "step_8").exists()
    load = ("--checkpoint.load_path" if second is recipe else "--train.checkpoint.load_path")
    second(out, f"{load}={out / 'step_4'}")
    resumed = losses(out)
    assert sorted(resumed) == list(range(1, STEPS + 1))
    assert resumed == straight  # bit for bit, the first four and the resumed four


@pytest.mark.slow
def test_a_converted_recipe_takes_the_new_only_fields(tmp_path):
    dump = tmp_path / "dump"
    recipe(Path("ckpt"), "--checkpoint.interval=1", "--checkpoint.keep_latest_k=1",
           "--optimizer.fused=True", f"--dump_folder={dump}")
    steps = sorted(p.name for p in (dump / "ckpt").iterdir() if p.name.startswith("step_"))
    assert steps == [f"step_{STEPS}"]  # keep_latest_k=1 under dump_folder
    assert sorted(losses(dump / "ckpt")) == list(range(1, STEPS + 1))


@pytest.mark.slow
def test_a_converted_recipe_compiles(tmp_path):
    out = tmp_path / "compiled"
    proc = recipe(out, "--training.steps=2", "--compile.enable")
    assert "compile=inductor" in proc.stdout + proc.stderr
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
