"""``data.type: preset_pt`` -- replayed pre-tokenized batches -- end to end, as users align two
implementations with it.

One legacy YAML in the style of the legacy code base's alignment regressions (fixed batches, no
shuffling, clipping effectively off, its accelerator keys written out) trains on the debug model:

* through both entries -- the YAML (``LLMTrainer``) and the recipe ``--from-yaml`` wrote from
  it (``HyperTrainer``) -- with bit-identical losses;
* on 1 rank and on 2 FSDP ranks, with losses within the layout tolerance of
  test_legacy_training.py;
* the 1-rank losses are pinned bit for bit in ``golden/preset_pt.json``.

The three runs go through the layout harness (the session's shared jobs).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers.layout import Case, Layout
from tests.helpers.torchrun import REPO

from .test_legacy_training import LAYOUT_RTOL

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden" / "preset_pt.json"
UPDATE_GOLDEN = os.environ.get("HYPER_PARALLEL_UPDATE_GOLDEN") == "1"
STEPS, GLOBAL_BATCH, SEQ_LEN = 8, 4, 32

ALIGNMENT_YAML = """\
# Alignment regression: replay fixed batches, 1 rank vs FSDP 2 (debug model).
model:
  name: qwen3_5
  config_overrides:
    flavor: debugmodel
data:
  type: preset_pt
  train_path: {path}
  max_seq_len: {seq_len}
  num_workers: 0
  pin_memory: false
train:
  max_steps: {steps}
  global_batch_size: {batch}
  micro_batch_size: 2
  seed: 1234
  comm_backend: gloo
  accelerator:
    dp_shard: -1
    zero_stage: 0
    comm_fusion: true
  optimizer:
    lr: 1.0e-3
    lr_min: 0.0
    lr_warmup_ratio: 0.25
    max_grad_norm: 1.0e+9       # clipping effectively off
    weight_decay: 0.0
  checkpoint:
    save_steps: 0
    save_hf_weights: false
  logging:
    log_steps: 1
    report_throughput: false
  debug:
    deterministic: true
"""


def write_alignment(folder: Path) -> Path:
    """The YAML and its preset file (exactly the batches the run needs) in ``folder``."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import make_data_fixtures
    finally:
        sys.path.pop(0)
    import torch

    folder.mkdir(parents=True)
    batches = make_data_fixtures.preset_batches(num_batches=STEPS * GLOBAL_BATCH // 2, batch=2,
                                                seq_len=SEQ_LEN)
    torch.save(batches, folder / "batches.pt")
    yaml_path = folder / "align.yaml"
    yaml_path.write_text(ALIGNMENT_YAML.format(path=folder / "batches.pt", seq_len=SEQ_LEN,
                                               steps=STEPS, batch=GLOBAL_BATCH))
    return yaml_path


def _make_files(folder: Path) -> dict:
    """The alignment YAML, its batches and the recipe ``--from-yaml`` writes for it."""
    from hyper_parallel.codegen import from_yaml

    alignment = write_alignment(folder / "alignment")
    work = folder / "recipe"
    work.mkdir()
    recipe, _ = from_yaml.convert(alignment, "align", work / "align.py", base=work)
    (work / "align.py").write_text(recipe.text)
    return {"yaml": str(alignment), "recipe folder": str(work), "recipe text": recipe.text}


@pytest.fixture(scope="module")
def runs(run_once, layouts) -> dict:
    """The legacy YAML on 1 and 2 FSDP ranks and its recipe on 1 rank (the layout harness; the
    files are made once per session, so the xdist workers ask for the same runs)."""
    files = run_once.get(("preset_pt files", STEPS, GLOBAL_BATCH, SEQ_LEN), _make_files)
    found = layouts.run_cases({
        # dp_shard: -1 in the YAML: inferred from the world size.
        "legacy 1 rank": Case((files["yaml"],), Layout(), argv_sets_layout=True),
        "legacy FSDP 2": Case((files["yaml"],), Layout(dp_shard=2), argv_sets_layout=True),
        "recipe 1 rank": Case(("--module", "align", "--config", "align"), Layout(),
                              argv_sets_layout=True, pythonpath=(files["recipe folder"],)),
    }, params=False)
    for name, run in found.items():
        assert run.error is None, (name, run.error)
    return {**{name: run.losses for name, run in found.items()},
            "recipe text": files["recipe text"]}


def test_the_recipe_replays_the_same_batches(runs):
    assert "config.dataloader.dataset = \"preset_pt\"" in runs["recipe text"]
    # data.shuffle is canonical false for a replay; the recipe states it.
    assert "config.dataloader.shuffle = False" in runs["recipe text"]
    assert len(runs["legacy 1 rank"]) == STEPS
    assert runs["recipe 1 rank"] == runs["legacy 1 rank"]  # bit for bit


def test_one_rank_and_two_fsdp_ranks_agree(runs):
    one, two = runs["legacy 1 rank"], runs["legacy FSDP 2"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(two, one))
    print(f"preset_pt: max relative loss difference FSDP 2 vs 1 rank: {worst:.2e}")
    assert two == pytest.approx(one, rel=LAYOUT_RTOL)


def test_golden_losses(runs):
    losses = runs["legacy 1 rank"]
    if UPDATE_GOLDEN or not GOLDEN.exists():
        if not UPDATE_GOLDEN:
            pytest.fail(f"{GOLDEN} is missing; record it with HYPER_PARALLEL_UPDATE_GOLDEN=1")
        GOLDEN.write_text(json.dumps({"steps": STEPS, "global_batch_size": GLOBAL_BATCH,
                                      "seq_len": SEQ_LEN, "losses": losses}, indent=1) + "\n")
    assert losses == json.loads(GOLDEN.read_text())["losses"]
