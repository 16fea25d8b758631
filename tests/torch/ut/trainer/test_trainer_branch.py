"""One YAML, two paths: ``LLMTrainer(parse_args(...))`` and
``HyperTrainer(_legacy_to_trainer_config(parse_args(...)))`` train identically.

Same parameter names and shapes, same optimizer groups and hyperparameters, the same LR at every
step and bit-identical losses for 5 steps, on 1 and on 2 ranks (torchrun, gloo).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.torchrun import REPO, torchrun

pytestmark = pytest.mark.slow

WORKER = REPO / "tests" / "torch" / "st" / "qwen3_5" / "workers" / "branch_worker.py"
EXAMPLES = REPO / "examples" / "yaml"
CASES = {
    "1 rank, dummy data": ("train_qwen3_5_debug.yaml", 1, ()),
    "2 ranks FSDP, corpus + eval + AC": ("train_qwen3_5_fsdp2.yaml", 2, ()),
}


def run(which: str, yaml_name: str, nproc: int, overrides, tmp_path: Path) -> dict:
    out = tmp_path / f"{which}.json"
    args = [which, str(EXAMPLES / yaml_name), str(out), "--train.max_steps=5",
            f"--train.checkpoint.output_dir={tmp_path / which}", *overrides]
    torchrun(WORKER, args, nproc=nproc, timeout=300)
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_paths_train_identically(case, tmp_path):
    yaml_name, nproc, overrides = CASES[case]
    legacy = run("legacy", yaml_name, nproc, overrides, tmp_path)
    new = run("new", yaml_name, nproc, overrides, tmp_path)
    assert (legacy.pop("trainer"), new.pop("trainer")) == ("LLMTrainer", "HyperTrainer")
    assert new["params"] == legacy["params"]
    assert new["groups"] == legacy["groups"]
    assert new["lrs"] == legacy["lrs"] and len(new["lrs"]) == 5
    assert new["losses"] == legacy["losses"]  # bit for bit
