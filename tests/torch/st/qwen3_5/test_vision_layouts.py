"""The image-text model on parallel layouts, images in every batch.

One legacy YAML in the style of the upstream image-text YAMLs (``data.type: vl_dummy`` at a
``vl_grid_t/h/w``, the debug image-text flavor) trains 4 steps on one rank and on FSDP 2, HSDP
(2 replicas), TP 2 (the decoder sharded, the tower replicated), PP 2 (the tower on the first
stage, the images row-aligned through the schedule), the MoE family's on EP 2
(each rank its rows and their images) and, with the tower frozen
(``model.freeze_modules: [model.visual]``, as the upstream YAMLs freeze it), on one rank and
FSDP 2. Each layout's per-step loss is within ``LAYOUT_RTOL`` (1e-6) of its one-rank run, its
gradient norm within ``GRAD_NORM_RTOL`` (1e-5): the text model's bounds
(``test_legacy_training.py``). The norm's is wider because one rank's float32 norm sums the
squares of whole tensors, a relative error of a few 1e-6 on CPU (``runtime/optim.py:
_full_norm``), which the sharded runs' partial sums do not share; measured here: losses 1.2e-7,
norms 4.5e-6 at worst, the text debug model's norms 4.2e-6 on the same YAML. The recipe
``--from-yaml`` writes from the YAML trains bit for bit as the YAML.

Context parallelism refuses the image-text model with its reason
(``models/qwen3_5/model_config.py: IMAGE_TEXT_REFUSALS``); the refusal is checked here too.
All runs go through the layout harness in one plan (one job per world size).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.layout import Case, Layout, assert_same_run

from .test_legacy_training import GRAD_NORM_RTOL, LAYOUT_RTOL

pytestmark = pytest.mark.slow

STEPS = 4

VL_YAML = """\
# Image-text training on synthetic images (legacy vl_dummy), the debug image-text model.
model:
  name: {model}
  config_overrides:
    flavor: debugmodel_vl
    num_hidden_layers: 4
{freeze}data:
  type: vl_dummy
  max_seq_len: 32
  vl_grid_t: 2
  vl_grid_h: 4
  vl_grid_w: 4
  num_workers: 0
  pin_memory: false
train:
  max_steps: {steps}
  global_batch_size: 4
  micro_batch_size: 2
  seed: 1234
  comm_backend: gloo
  optimizer:
    lr: 1.0e-3
    max_grad_norm: 1.0
  checkpoint:
    save_steps: 0
    save_hf_weights: false
  logging:
    log_steps: 1
  debug:
    deterministic: true
"""


def _make_files(folder: Path) -> dict:
    from hyper_parallel.codegen.migration import from_yaml

    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, model, freeze in (("vl", "qwen3_5", ""),
                                ("vl_frozen", "qwen3_5", "  freeze_modules: [model.visual]\n"),
                                ("vl_moe", "qwen3_5_moe", "")):
        path = folder / f"{name}.yaml"
        path.write_text(VL_YAML.format(steps=STEPS, freeze=freeze, model=model))
        files[name] = str(path)
    work = folder / "recipe"
    work.mkdir(exist_ok=True)
    recipe, _ = from_yaml.convert(Path(files["vl"]), "vl_recipe", work / "vl_recipe.py",
                                  base=work)
    (work / "vl_recipe.py").write_text(recipe.text)
    files["recipe folder"] = str(work)
    files["recipe text"] = recipe.text
    return files


@pytest.fixture(scope="module")
def runs(run_once, layouts) -> dict:
    files = run_once.get(("vision layouts files", STEPS), _make_files)
    yaml, frozen, moe = (files["vl"],), (files["vl_frozen"],), (files["vl_moe"],)
    found = layouts.run_cases({
        "1 rank": Case(yaml, Layout()),
        "FSDP 2": Case(yaml, Layout(dp_shard=2)),
        "HSDP 2": Case(yaml, Layout(dp_replicate=2)),
        "TP 2": Case(yaml, Layout(tp=2)),
        "frozen 1 rank": Case(frozen, Layout()),
        "frozen FSDP 2": Case(frozen, Layout(dp_shard=2)),
        "recipe 1 rank": Case(("--module", "vl_recipe", "--config", "vl_recipe"), Layout(),
                              pythonpath=(files["recipe folder"],)),
        "MoE 1 rank": Case(moe, Layout()),
        "MoE EP 2": Case(moe, Layout(ep=2)),
        "PP 2": Case((*yaml, "--train.accelerator.pp_micro_batch_num=2"), Layout(pp=2)),
        "CP 2": Case(yaml, Layout(cp=2)),
    }, params=False)
    return {**found, "recipe text": files["recipe text"]}


@pytest.mark.parametrize("layout", ["FSDP 2", "HSDP 2", "TP 2", "PP 2"])
def test_layout_matches_one_rank(runs, layout):
    worst = assert_same_run(runs[layout], runs["1 rank"], rtol=LAYOUT_RTOL,
                            grad_norm_rtol=GRAD_NORM_RTOL)
    print(f"image-text {layout} vs 1 rank: {worst}")
    assert len(runs[layout].steps) == STEPS


def test_moe_expert_parallel_matches_one_rank(runs):
    """EP splits each batch's rows over the ranks: each takes its rows' images."""
    worst = assert_same_run(runs["MoE EP 2"], runs["MoE 1 rank"], rtol=LAYOUT_RTOL,
                            grad_norm_rtol=GRAD_NORM_RTOL)
    print(f"image-text MoE EP 2 vs 1 rank: {worst}")
    assert len(runs["MoE EP 2"].steps) == STEPS


def test_frozen_tower_on_fsdp_matches_one_rank_and_trains_less(runs):
    worst = assert_same_run(runs["frozen FSDP 2"], runs["frozen 1 rank"], rtol=LAYOUT_RTOL,
                            grad_norm_rtol=GRAD_NORM_RTOL)
    print(f"image-text, frozen tower, FSDP 2 vs 1 rank: {worst}")
    # The tower's gradients are out of the norm, and its weights out of the update.
    assert runs["frozen 1 rank"].grad_norms != runs["1 rank"].grad_norms
    assert runs["frozen 1 rank"].losses[0] == runs["1 rank"].losses[0]


def test_the_recipe_is_the_yaml(runs):
    assert 'config.dataloader.dataset = "vl_dummy"' in runs["recipe text"]
    assert runs["recipe 1 rank"].losses == runs["1 rank"].losses  # bit for bit
    assert runs["recipe 1 rank"].grad_norms == runs["1 rank"].grad_norms


@pytest.mark.parametrize("layout,reason", [("CP 2", "context parallelism")])
def test_refused_layouts_say_why(runs, layout, reason):
    error = runs[layout].error
    assert error is not None and reason in error and "image-text" in error, error
