"""Weights & Biases end to end, one rank in this process: a tiny 3-step run through each entry
writes an offline W&B run (``tests/conftest.py`` sets ``WANDB_MODE=offline``) next to its
metrics.jsonl, holding every number of every step's record -- read back from the run's own
files -- and says once where it is and how to upload it; without the ``wandb`` package the
switch is refused in the entry's own names with the install command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hyper_parallel import train
from tests.helpers.wandb_files import offline_runs, read_offline_run

REPO = Path(__file__).resolve().parents[4]
DEBUG_YAML = str(REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml")
TINY = "--model.config_overrides={flavor: tiny}"
LEGACY = [DEBUG_YAML, "--train.max_steps=3", TINY, "--train.checkpoint.output_dir=out"]
RECIPE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel", "--training.steps=3",
          TINY, "--checkpoint.interval=0", "--dump_folder=.", "--checkpoint.folder=out"]


def assert_run_matches_metrics(out: Path, err: str, project: str, name: str) -> None:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    (folder,) = offline_runs(out)
    run = read_offline_run(folder)
    assert (run.project, run.name, run.exit_code) == (project, name, 0)
    assert run.config["training.steps"] == "3"  # the run's configuration
    for record in records:
        want = {f"train/{k}": v for k, v in record.items()
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert {"train/loss", "train/grad_norm", "train/lr", "train/step_time",
                "train/tokens_per_sec"} <= set(want)
        assert run.history[record["step"]] == pytest.approx(want, rel=1e-12)
    assert sorted(run.history) == [1, 2, 3]
    lines = [line for line in err.splitlines() if "W&B" in line]
    assert len(lines) == 1 and lines[0].endswith(
        f"W&B run offline (WANDB_MODE=offline): written to {folder.resolve()}; upload it with "
        f"`wandb sync {folder.resolve()}`"), lines


def test_the_legacy_keys_log_a_run(run_entry, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_DIR", raising=False)
    code, err = run_entry(train.main, [*LEGACY, "--train.logging.report_to=wandb",
                                       "--train.wandb.project=hp-legacy",
                                       "--train.wandb.run_name=legacy-run"])
    assert code == 0, err[-3000:]
    assert_run_matches_metrics(tmp_path / "out", err, "hp-legacy", "legacy-run")


def test_the_recipe_fields_log_a_run(run_entry, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_DIR", raising=False)
    code, err = run_entry(train.main, [*RECIPE, "--metrics.enable_wandb=True",
                                       "--metrics.wandb_project=hp-recipe",
                                       "--metrics.wandb_run_name=recipe-run"])
    assert code == 0, err[-3000:]
    assert_run_matches_metrics(tmp_path / "out", err, "hp-recipe", "recipe-run")


@pytest.mark.parametrize("entry", ["legacy", "recipe"])
def test_without_the_package_each_entry_names_its_switch(entry, run_entry, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # find_spec("wandb") -> None
    argv = ([*LEGACY, "--train.wandb.enabled=true"] if entry == "legacy"
            else [*RECIPE, "--metrics.enable_wandb=True"])
    code, err = run_entry(train.main, argv)
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "pip install hyper_parallel[wandb]" in line
    if entry == "legacy":
        assert "train.wandb.enabled" in line and "(recipe field: metrics.enable_wandb)" in line
    else:
        assert "metrics.enable_wandb" in line and "train.wandb" not in line


def test_a_failed_run_finishes_its_wandb_run_as_failed(run_entry, tmp_path, monkeypatch):
    from hyper_parallel.runtime.fault_injection import FAULT_INJECT_ENV
    from hyper_parallel.runtime.faults import FAILED_EXIT_CODE

    monkeypatch.delenv("WANDB_DIR", raising=False)
    monkeypatch.setenv(FAULT_INJECT_ENV, "raise_at_step:2")
    code, err = run_entry(train.main, [*RECIPE, "--metrics.enable_wandb=True"])
    assert code == FAILED_EXIT_CODE, err[-3000:]
    (folder,) = offline_runs(tmp_path / "out")
    run = read_offline_run(folder)
    assert run.exit_code == 1 and sorted(run.history) == [1]
