"""The CPU-sized generated recipes train for real: `torchrun -m hyper_parallel.train --module
qwen3_5_v2 --config <recipe>` for 3 steps, with checkpoints; the layouts agree."""

from __future__ import annotations

import json

import pytest

from tests.helpers.torchrun import torchrun

pytestmark = pytest.mark.slow

CPU_RECIPES = {
    "qwen3_5_v2_debugmodel": 1,
    "qwen3_5_v2_debugmodel_fsdp2": 2,
    "qwen3_5_v2_debugmodel_tp2": 2,
}


def train_recipe(recipe: str, nproc: int, out) -> list[float]:
    torchrun("hyper_parallel.train", ["--module", "qwen3_5_v2", "--config", recipe,
                                      "--training.steps", "3", "--checkpoint.folder", str(out),
                                      "--checkpoint.interval", "3", "--metrics.log_freq", "1"],
             nproc=nproc, module=True, timeout=300)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert (out / "step_3").is_dir()
    return [r["loss"] for r in records if "loss" in r]


def test_cpu_recipes_train_and_agree(tmp_path):
    losses = {name: train_recipe(name, n, tmp_path / name) for name, n in CPU_RECIPES.items()}
    reference = losses["qwen3_5_v2_debugmodel"]
    assert len(reference) == 3
    for name, values in losses.items():
        assert values == pytest.approx(reference, rel=1e-6), name
