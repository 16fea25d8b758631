"""The legacy trainer end to end: `torchrun scripts/train_lm.py old.yaml` on 1, 2 and 4 CPU ranks.

Every test here launches real torchrun jobs (gloo) and is marked slow; `make test` runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from .conftest import TRAIN_SCRIPT, train

pytestmark = pytest.mark.slow

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE_GOLDEN = os.environ.get("HYPER_PARALLEL_UPDATE_GOLDEN") == "1"

#: The CPU-sized example YAMLs whose 10-step losses are pinned bit for bit.
GOLDEN_RUNS = {
    "train_qwen3_5_debug": ("train_qwen3_5_debug.yaml", (), 1),
    "train_qwen3_5_fsdp2": ("train_qwen3_5_fsdp2.yaml", (), 2),
    "train_qwen3_5_tp2": ("train_qwen3_5_tp2.yaml", (), 2),
    "train_qwen3_5_demo": ("train_qwen3_5_demo.yaml", ("--train.max_steps=10",), 2),
}

# One workload (debug model, synthetic data, 4 samples a step, no shuffling) in four layouts.
LAYOUTS = {
    "1 rank": ((), 1),
    "FSDP 2": (("--train.accelerator.dp_shard=2",), 2),
    "TP 2": (("--train.accelerator.tp=2", "--train.accelerator.dp_shard=1"), 2),
    "HSDP 2x2": (("--train.accelerator.dp_replicate=2", "--train.accelerator.dp_shard=2",
                  "--train.micro_batch_size=1"), 4),
}
#: Tightest relative loss tolerance that holds between layouts (measured; see the closing note).
LAYOUT_RTOL = 1e-6


@pytest.mark.parametrize("name", sorted(GOLDEN_RUNS))
def test_golden_losses_bit_for_bit(name, cached_train):
    yaml_name, overrides, nproc = GOLDEN_RUNS[name]
    run = cached_train(yaml_name, *overrides, nproc=nproc)
    assert len(run.losses) == 10
    golden = GOLDEN_DIR / f"{name}.json"
    if UPDATE_GOLDEN or not golden.exists():
        if not UPDATE_GOLDEN:
            pytest.fail(f"{golden} is missing; record it with HYPER_PARALLEL_UPDATE_GOLDEN=1")
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps({"yaml": yaml_name, "overrides": list(overrides),
                                      "nproc": nproc, "losses": run.losses}, indent=1) + "\n")
    expected = json.loads(golden.read_text())["losses"]
    assert run.losses == expected  # exact float equality: bit for bit


def test_loss_falls_on_the_shipped_corpus(cached_train):
    run = cached_train("train_qwen3_5_demo.yaml", nproc=2)  # test_recipes_from_yaml's key
    assert run.losses[-1] < run.losses[0] - 1.0, run.losses


def test_layouts_agree(cached_train):
    results = {name: cached_train("train_qwen3_5_debug.yaml", *ov, nproc=n)
               for name, (ov, n) in LAYOUTS.items()}
    reference = results["1 rank"].losses
    assert len(reference) == 10
    report = {}
    for name, run in results.items():
        worst = max(abs(a - b) / abs(b) for a, b in zip(run.losses, reference))
        report[name] = worst
        assert run.losses == pytest.approx(reference, rel=LAYOUT_RTOL), (name, run.losses, reference)
    print("max relative loss difference vs 1 rank:", report)


def test_checkpoint_weights_load_on_another_layout(tmp_path):
    """DCP reshards the weights of a checkpoint onto another layout: one fp32 rank, which is not
    wrapped in FSDP, saves plain tensors, two FSDP ranks save DTensor shards, and each loads
    the other's (``model.weights_path``; an exact resume across world sizes is refused, the
    data positions being per rank). Both then train their first step from the same 2-step
    weights, so their losses agree within the layouts' tolerance, and differ from a fresh
    start's."""
    one, two = LAYOUTS["1 rank"], LAYOUTS["FSDP 2"]
    saved = {}
    for name, (overrides, nproc) in (("1 rank", one), ("FSDP 2", two)):
        saved[name] = train("train_qwen3_5_debug.yaml", "--train.max_steps=2",
                            "--train.checkpoint.save_steps=2", *overrides, nproc=nproc,
                            output_dir=tmp_path / name.replace(" ", "_"))
    loaded = {}
    for source, (overrides, nproc) in (("1 rank", two), ("FSDP 2", one)):
        weights = saved[source].output_dir / "step_2"
        loaded[source] = train("train_qwen3_5_debug.yaml", "--train.max_steps=1", *overrides,
                               f"--model.weights_path={weights}", nproc=nproc,
                               output_dir=tmp_path / f"from_{source.replace(' ', '_')}")
    first = {source: run.losses[0] for source, run in loaded.items()}
    assert first["1 rank"] == pytest.approx(first["FSDP 2"], rel=LAYOUT_RTOL), first
    fresh = saved["1 rank"].losses[0]
    assert abs(first["1 rank"] - fresh) > 1e-3, (first, fresh)  # the weights were loaded


def test_same_run_twice_is_bit_identical(cached_train):
    """Two separate torchrun jobs of the same config give the same losses bit for bit (the
    override restates the YAML's value, so the session cache runs the job a second time)."""
    first = cached_train("train_qwen3_5_debug.yaml", nproc=1)
    second = cached_train("train_qwen3_5_debug.yaml", "--train.accelerator.dp_shard=1", nproc=1)
    assert first.losses == second.losses


def test_hf_export_loads_back_with_identical_logits(tmp_path):
    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM, Qwen3_5StateDictAdapter
    from hyper_parallel.runtime.model_setup import load_pretrained_weights

    out = tmp_path / "run"
    train("train_qwen3_5_debug.yaml", "--train.max_steps=2", "--train.checkpoint.save_steps=2",
          "--train.checkpoint.save_hf_weights=true", nproc=1, output_dir=out)
    hf_dir, dcp_dir = out / "step_2" / "hf_ckpt", out / "step_2"
    assert (hf_dir / "model.safetensors").is_file() or (hf_dir / "model.safetensors.index.json").is_file()
    config = FLAVORS["debugmodel"]
    tokens = torch.randint(0, config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0))
    logits = []
    for path in (hf_dir, dcp_dir):
        model = Qwen3_5ForCausalLM(config)
        load_pretrained_weights(model, str(path), adapter=Qwen3_5StateDictAdapter, model_config=config)
        logits.append(model(tokens))
    assert torch.equal(logits[0], logits[1])
    # And the trainer's own weights_path path: training resumes from the exported weights.
    run = train("train_qwen3_5_debug.yaml", "--train.max_steps=1", f"--model.weights_path={hf_dir}",
                nproc=1, output_dir=tmp_path / "again")
    assert run.losses and run.losses[0] < 7.7


def test_bad_yaml_is_a_clear_error_before_any_work(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  optimizer:\n    lr: 1e-3\n    warmup: 3\n")
    proc = subprocess.run([os.sys.executable, str(TRAIN_SCRIPT), str(bad)], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2
    assert f"{bad}:4: train.optimizer.warmup: unknown key" in proc.stderr
