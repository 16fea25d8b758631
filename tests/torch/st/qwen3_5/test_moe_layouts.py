"""The Qwen3.5 MoE debug model on every layout it is laid out for, in both worlds.

One workload -- a legacy MoE YAML (the debug flavor cut to 2 layers, one Gated DeltaNet and one
gated attention layer, each with 8 experts of which 2 per token; synthetic tokens, 4 steps of
4 sequences in micro-batches of 2, the expert bias balancing the load) -- trains on 1 rank,
FSDP 2, EP 2, EP 2 x FSDP 2, EP 2 x TP 2, PP 2 and PP 2 x EP 2, and the recipe
``--from-yaml`` writes for it on 1 rank and EP 2 (the layout harness, :mod:`tests.helpers.layout`: one job per
world size).

* Every layout agrees with the single-rank run: per-step losses within :data:`MOE_LAYOUT_RTOL`,
  gradient norms within :data:`MOE_GRAD_NORM_RTOL`. Expert parallelism changes where the experts run, not what they
  compute: the EP ranks load the same batch and split its rows, tokens reach their experts by
  all-to-all, and the expert gradients come back summed over the ranks' rows; only the order of
  the reductions differs from one rank.
* The legacy YAML and its recipe are the same run: bit for bit, on one rank (the entries differ
  only before the engine, which every layout shares).
* FSDP2's explicit prefetching (each layer with its routed experts' unit) changes timing, never
  results: EP 2 x FSDP 2 with it is the run without, bit for bit.
* Every layout's Hugging Face export (written at the end of training, streamed unit by unit) is
  its checkpoint's weights in the layout ``save_pretrained`` writes -- one file, a file per
  pipeline stage under PP, files of at most 100 KB for the recipe runs, which set
  ``checkpoint.export_hf_max_shard_size`` -- and transformers computes the trained model's
  logits from it.
* Packed rows (``block_causal``, :mod:`tests.helpers.packed_rows`, the model cut the same
  way): the expert-parallel ranks split a batch's rows and each makes the documents of its own
  rows, so EP 2, and PP 2 x EP 2 (each pipeline micro-batch carrying its rows' documents),
  train the one-rank packed run within the layouts' bounds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.hf_export_check import assert_export_is_the_model
from tests.helpers.layout import ONE_RANK, Case, Layout, assert_same_run
from tests.helpers.packed_rows import packed_workload

pytestmark = pytest.mark.slow

#: The legacy YAML; the harness adds each layout's degrees on the command line.
MOE_YAML = """\
model:
  name: qwen3_5_moe
  config_overrides: {flavor: debugmodel, full_attention_interval: 2}
  num_hidden_layers: 2
data:
  type: dummy
  max_seq_len: 32
train:
  max_steps: 4
  global_batch_size: 4
  micro_batch_size: 2
  optimizer: {lr: 1.0e-3, lr_warmup_ratio: 0.25}
  moe_monitor: {enabled: true, lr: 1.0e-3}
  logging: {log_steps: 1}
  checkpoint: {save_steps: 4, save_hf_weights: true}
  debug: {deterministic: true}
"""
LAYOUTS = {
    "1 rank": ONE_RANK,
    "FSDP 2": Layout(dp_shard=2),
    "EP 2": Layout(ep=2),
    "EP 2 x FSDP 2": Layout(dp_shard=2, ep=2),
    "EP 2 x TP 2": Layout(ep=2, tp=2),
    "PP 2": Layout(pp=2),
    "PP 2 x EP 2": Layout(ep=2, pp=2),
}
#: The layouts' own settings besides their degrees: the pipeline micro-batches (the step's 4
#: rows in micro-batches of 2, as the accumulation steps of one rank are).
LAYOUT_OVERRIDES = {name: ("--train.accelerator.pp_micro_batch_num=2",)
                    for name, layout in LAYOUTS.items() if layout.pp > 1}
#: The layouts the recipe trains on too. The two entries share everything after the
#: conversion, which every layout runs; the recipe's own layouts are trained by
#: test_recipes_from_yaml and test_preset_pt (FSDP 2), and each run here costs the suite.
BOTH_WORLDS = ("1 rank", "EP 2")
#: The recipe runs' Hugging Face files (a new-tree field: the legacy YAML cannot set it); the
#: model is 0.8 MB.
RECIPE_SHARD = ("--checkpoint.export_hf_max_shard_size=100KB",)
RECIPE_SHARD_BYTES = 100_000
#: Between layouts: the data-parallel and expert-parallel reductions, and TP's row-parallel
#: all-reduces, sum in another order. Losses: measured 1.3e-7 at worst. Gradient norms: measured
#: 3.5e-6 at worst, and that is the float32 norm itself, not the gradients: one rank sums a
#: tensor's squares on the CPU with that much error (the float64 norms of one rank's and of
#: FSDP 2's first-step gradients agree to 7e-9). The clipping norm stays float32: the legacy
#: golden losses clip with it.
MOE_LAYOUT_RTOL = 1e-6
MOE_GRAD_NORM_RTOL = 1e-5
#: Prefetching one layer (and its experts) ahead in the forward, two behind in the backward:
#: one extra case of the 4-rank job, on the layout with both an expert and a dense FSDP mesh.
PREFETCH = ("--train.accelerator.fsdp_forward_prefetch=1",
            "--train.accelerator.fsdp_backward_prefetch=2")
PREFETCH_LAYOUT = "EP 2 x FSDP 2"
#: The packed workload's layouts, against its one-rank run (the step's 4 rows in micro-batches
#: of 2, pipeline micro-batches too).
PACKED_LAYOUTS = {"EP 2": (), "PP 2 x EP 2": LAYOUT_OVERRIDES["PP 2 x EP 2"]}


def _write_recipe(folder: Path) -> list[str]:
    from hyper_parallel.codegen.__main__ import main

    folder.mkdir(parents=True)
    yaml_path = folder / "moe_layouts.yaml"
    yaml_path.write_text(MOE_YAML)
    assert main(["--from-yaml", str(yaml_path), "-o", str(folder / "moe_layouts.py")]) == 0
    return [str(yaml_path), str(folder)]


@pytest.fixture(scope="module")
def recipe(run_once):
    """The YAML and the recipe module ``--from-yaml`` writes for it, in one folder of the
    session: the cases' command lines, hence the harness's keys, are the same on every worker."""
    yaml_path, folder = run_once.get("moe layouts recipe", _write_recipe)
    return Path(yaml_path), Path(folder)


@pytest.fixture(scope="module")
def runs(layouts, recipe, run_once) -> dict:
    """``{(layout name, "legacy" | "recipe" | "packed"): LayoutRun}``: one job per world
    size."""
    yaml_path, folder = recipe
    packed = packed_workload(run_once)["packed_moe.yaml"]
    cases = {}
    for name, layout in LAYOUTS.items():
        cases[name, "legacy"] = Case((str(yaml_path), *LAYOUT_OVERRIDES.get(name, ())), layout)
    for name in BOTH_WORLDS:
        cases[name, "recipe"] = Case(("--module", "moe_layouts", "--config", "moe_layouts",
                                      *RECIPE_SHARD), LAYOUTS[name], pythonpath=(str(folder),))
    cases[PREFETCH_LAYOUT, "prefetch"] = Case((str(yaml_path), *PREFETCH),
                                              LAYOUTS[PREFETCH_LAYOUT])
    for name, overrides in {"1 rank": (), **PACKED_LAYOUTS}.items():
        cases[name, "packed"] = Case((str(packed), *overrides), LAYOUTS[name])
    return layouts.run_cases(cases, params=False)


@pytest.mark.parametrize("name", BOTH_WORLDS)
def test_legacy_yaml_and_recipe_are_one_run(name, runs):
    legacy, recipe_run = runs[name, "legacy"], runs[name, "recipe"]
    assert legacy.error is None, legacy.error
    assert legacy.steps == list(range(1, 5))
    assert_same_run(recipe_run, legacy, rtol=0)


@pytest.mark.parametrize("name", [n for n in LAYOUTS if n != "1 rank"])
def test_layouts_agree_with_one_rank(name, runs):
    worst = assert_same_run(runs[name, "legacy"], runs["1 rank", "legacy"],
                            rtol=MOE_LAYOUT_RTOL, grad_norm_rtol=MOE_GRAD_NORM_RTOL)
    print(f"{name} vs 1 rank, worst relative differences:", worst)


def test_fsdp_prefetch_changes_timing_not_results(runs):
    assert_same_run(runs[PREFETCH_LAYOUT, "prefetch"], runs[PREFETCH_LAYOUT, "legacy"], rtol=0)


@pytest.mark.parametrize("name, world", [*((n, "legacy") for n in LAYOUTS),
                                         *((n, "recipe") for n in BOTH_WORLDS)])
def test_hf_export_is_the_trained_model(name, world, runs):
    """The export of every layout holds its step-4 checkpoint's weights and gives its logits in
    transformers, in one file (the default shard size), one per pipeline stage, or 100 KB files
    (each file of the plan written by the rank that holds its weights)."""
    run = runs[name, world]
    assert run.error is None, run.error
    step_4 = run.checkpoint_folder / "step_4"
    assert sorted(p.parent.name for p in run.checkpoint_folder.glob("step_*/hf_ckpt")) == [
        "step_4"]
    recipe = world == "recipe"
    result = assert_export_is_the_model(step_4 / "hf_ckpt", step_4,
                                        max_shard_bytes=RECIPE_SHARD_BYTES if recipe else None)
    print(f"{name} ({world}): {result}")
    if recipe:
        # 0.8 MB: the embedding and the head (0.26 MB each) alone, the layers in 100 KB files
        assert result["files"] >= 4
    else:
        assert result["files"] == LAYOUTS[name].pp


@pytest.mark.parametrize("name", PACKED_LAYOUTS)
def test_packed_rows_keep_their_documents_on_the_expert_layouts(name, runs):
    worst = assert_same_run(runs[name, "packed"], runs["1 rank", "packed"],
                            rtol=MOE_LAYOUT_RTOL, grad_norm_rtol=MOE_GRAD_NORM_RTOL)
    print(f"packed {name} vs packed 1 rank, worst relative differences:", worst)
