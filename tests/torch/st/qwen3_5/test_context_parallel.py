"""Context parallelism: the token mixers against the one-rank layer, and whole runs against the
one-rank run, in both worlds.

**The layers** (one job of ``workers/context_parallel_worker.py`` on 2 ranks and one on 4;
cp = the world size). Each form of :mod:`hyper_parallel.models.qwen3_5.context_parallel` runs a
256-position sequence split over the ranks and is compared with the same layer on the whole
sequence, forward (the rank's output shard) and backward (its input-gradient shard, and every
parameter gradient summed over the ranks as FSDP sums them):

* full attention: Ulysses (fused and async), Ulysses with KV heads repeated (1 KV head over 2
  and 4 ranks), the all-gather form;
* Gated DeltaNet: Ulysses over heads (fused and async), state passing (1 key head, 2 value
  heads: no head count divides);
* causality: changing the input from a position inside a later rank's shard moves no output
  before it, and does move the ones after it.

Ulysses forward outputs are bit-identical to the one-rank layer (each head sees the same
sequence and the same ops); the gradients and the state-passing outputs sum in another order
(:data:`LAYER_RTOL`).

**Packed rows** (``block_causal``, issue 46), in the same jobs: every form again on two rows of
documents that cross the shard boundaries, one beginning exactly at one, some beginning inside
the convolution's window before one and shorter than it, one longer than a chunk, a padded
tail (the worker's ``PACKED``), against the one-rank layer on the whole rows' documents within
:data:`LAYER_RTOL`; and a small ``block_causal`` LM's step on each rank's part of a packed
batch as the trainer splits it (Ulysses, and all-gather attention with state passing): its
loss is the one-rank packed step's (:data:`CP_RUN_RTOL`) and the token-weighted mean of the
documents' losses run alone, its logits and every gradient the one-rank packed model's
(:data:`LAYER_RTOL`).

**The runs** (the layout harness; the tiny flavor, 3 Gated DeltaNet layers and 1 attention
layer, at ``max_seq_len`` 512, 4 steps of 4 sequences, warmup and decay, no clipping): CP 2 and
CP 2 x FSDP 2 (the issue's bar), the all-gather / state-passing / async forms, CP 2 x TP 2
(heads split both ways), CP 2 x PP 2 (1F1B, two stages each running its shard of the rows),
selective activation checkpointing and bf16 mixed precision, each
against the one-rank run within :data:`CP_RUN_RTOL`; packed rows (``block_causal``,
``preset_pt``) on CP 2, Ulysses and all-gather with state passing, and on CP 2 x PP 2 (each
pipeline micro-batch carrying its rows' shard of their documents), against the one-rank packed
run within the same bound; a legacy CP YAML and the recipe
``--from-yaml`` writes for it are one run, bit for bit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.golden import NATIVE_ENV, PINNED_ENV, golden_numerics, record_native_figures
from tests.helpers.layout import ONE_RANK, Case, Layout, assert_same_run
from tests.helpers.torchrun import spawn_ranks

pytestmark = pytest.mark.slow

WORKER = Path(__file__).parent / "workers" / "context_parallel_worker.py"

#: Layer gradients (and state-passing outputs) against the one-rank layer, relative to the
#: largest magnitude: float32 sums over 2 or 4 ranks; measured 1.2e-6 (Ulysses, 2 ranks) and
#: 8.6e-6 (state passing, 4 ranks: the ranks' maps folded in sequence).
LAYER_RTOL = 2e-5
#: Whole runs against one rank: per-step losses and gradient norms (the issue's bar). The
#: gradient norms come closest (each gradient is the sum of the shards' contributions:
#: measured 5.8e-7 to 7.3e-7 over these 4 steps, the losses 6.3e-8; the differences grow step
#: by step, 9.0e-7 at step 8 of an 8-step run), so the runs use the pinned kernels of
#: :mod:`tests.helpers.numerics` and measure the same on every CPU that runs the suite -- but
#: on a machine where this test measured them on its native kernels under the same bound
#: (:data:`NATIVE_FIGURES`; :mod:`tests.helpers.golden`), which run there at twice the speed.
CP_RUN_RTOL = 1e-6
#: This machine's native figures of the runs held to :data:`CP_RUN_RTOL`, where it has them:
#: written by :func:`test_native_figures_are_recorded_on_request`.
NATIVE_FIGURES = Path(__file__).parent / "golden" / "context_parallel_runs.json"
NUMERICS = golden_numerics(NATIVE_FIGURES)
#: bf16 compute, context parallel against one rank: the same casts, sums in another order.
CP_BF16_RTOL = 2e-2

CP_YAML = """\
model:
  name: qwen3_5
  config_overrides: {flavor: tiny}
data:
  type: dummy
  max_seq_len: 512
train:
  max_steps: 4
  global_batch_size: 4
  micro_batch_size: 2
  optimizer: {lr: 1.0e-3, lr_warmup_ratio: 0.25, max_grad_norm: 100.0}
  logging: {log_steps: 1}
  checkpoint: {save_steps: 0, save_hf_weights: false}
  debug: {deterministic: true}
"""
ACC = "--train.accelerator."
#: The pipeline's two micro-batches a step (one per accumulation micro-batch's rows).
PP = ACC + "pp_micro_batch_num=2"
#: name -> (overrides, layout, bound): every case against the one-rank run.
SAVE_AT_2 = "--train.checkpoint.save_steps=2"
LAYOUTS = {
    "CP 2": ((SAVE_AT_2,), Layout(cp=2), CP_RUN_RTOL),  # a save changes no loss
    "CP 2 x FSDP 2": (("--train.micro_batch_size=1",), Layout(dp_shard=2, cp=2), CP_RUN_RTOL),
    # Per TP rank tiny has 1 query head and 1 Gated DeltaNet key head, which 2 context ranks
    # cannot split: the attention all-gathers K/V and the Gated DeltaNet passes state.
    "CP 2 x TP 2": ((ACC + "ulysses_degree=1", ACC + "linear_attention_cp_mode=p2p"),
                    Layout(cp=2, tp=2), CP_RUN_RTOL),
    "CP 2 selective AC": (("--train.gradient_checkpointing.activation_checkpoint=selective",),
                          Layout(cp=2), CP_RUN_RTOL),
    # Each stage runs its shard of the rows; the schedule cuts the shard's rows (1F1B).
    "CP 2 x PP 2": ((PP,), Layout(cp=2, pp=2), CP_RUN_RTOL),
}
BF16 = "--train.mixed_precision.enabled=true"
#: The packed runs (``block_causal``; :func:`_write_packed`): Ulysses, and all-gather attention
#: with state passing, and Ulysses through pipeline stages (each pipeline micro-batch carries
#: its rows' shard of their documents), each against the one-rank packed run within
#: :data:`CP_RUN_RTOL`: name -> (overrides, layout).
PACKED_LAYOUTS = {
    "CP 2 packed": ((), Layout(cp=2)),
    "CP 2 packed p2p": ((ACC + "ulysses_degree=1", ACC + "linear_attention_cp_mode=p2p"),
                        Layout(cp=2)),
    "CP 2 x PP 2 packed": ((PP,), Layout(cp=2, pp=2)),
}


# ====================================================================== the layers
@pytest.fixture(scope="module", params=[2, 4], ids=["cp2", "cp4"])
def layer_job(request, run_once) -> dict:
    """Every layer case on ``cp`` ranks: ``{case: [rank 0's report, ...]}``."""
    world = request.param

    def make(folder: Path) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        spawn_ranks(WORKER, [str(folder / "result.json")], nproc=world, timeout=180)
        return json.loads((folder / "result.json").read_text())

    return run_once.get(("context_parallel_layers", world), make)


LAYER_CASES = ("attention_ulysses", "attention_ulysses_async", "attention_ulysses_kv_repeat",
               "attention_allgather", "gdn_ulysses", "gdn_ulysses_async", "gdn_p2p")


@pytest.mark.parametrize("case", LAYER_CASES)
def test_layer_forward_and_backward_match_the_one_rank_layer(layer_job, case):
    for rank, report in enumerate(layer_job[case]):
        if case.startswith(("attention", "gdn_ulysses")):
            assert report["out"] == 0.0, (rank, report)  # Ulysses: the same ops per head
        assert report["out"] <= LAYER_RTOL * report["out_max"], (rank, report)
        assert report["x_grad"] <= LAYER_RTOL * report["x_grad_max"], (rank, report)
        for name, (diff, largest) in report["params"].items():
            assert largest > 0, f"{case}: {name} got no gradient"
            assert diff <= LAYER_RTOL * largest, (rank, name, diff, largest)


PACKED_CASES = ("attention_ulysses", "attention_ulysses_kv_repeat", "attention_allgather",
                "gdn_ulysses", "gdn_p2p")


@pytest.mark.parametrize("case", PACKED_CASES)
def test_packed_documents_across_the_shards_match_the_one_rank_layer(layer_job, case):
    """Documents crossing, starting at and starting just before the shard boundaries: each
    form keeps them apart exactly as the one-rank layer does on the whole rows."""
    for rank, report in enumerate(layer_job[f"packed_{case}"]):
        if case.startswith(("attention_ulysses", "gdn_ulysses")):
            assert report["out"] == 0.0, (rank, report)  # the same documents' ops per head
        assert report["out"] <= LAYER_RTOL * report["out_max"], (rank, report)
        assert report["x_grad"] <= LAYER_RTOL * report["x_grad_max"], (rank, report)
        for name, (diff, largest) in report["params"].items():
            assert largest > 0, f"{case}: {name} got no gradient"
            assert diff <= LAYER_RTOL * largest, (rank, name, diff, largest)


@pytest.mark.parametrize("case", ["model_ulysses", "model_allgather_p2p"])
def test_a_packed_step_under_context_parallelism_is_the_documents_alone(layer_job, case):
    """The step's loss over the ranks is the one-rank packed step's and the token-weighted
    mean of the documents' losses run alone; its logits and every gradient the one-rank
    packed model's."""
    for rank, report in enumerate(layer_job[case]):
        assert report["tokens"] == report["alone_tokens"], report  # the same targets
        assert report["loss"] == pytest.approx(report["reference_loss"], rel=CP_RUN_RTOL)
        assert report["loss"] == pytest.approx(report["alone_loss"], rel=1e-5)
        if case == "model_ulysses":  # position-wise layers, and the same ops per head
            assert report["logits"] == 0.0, (rank, report)
        assert report["logits"] <= LAYER_RTOL * report["logits_max"], (rank, report)
        for name, (diff, largest) in report["params"].items():
            assert largest > 0, f"{case}: {name} got no gradient"
            assert diff <= LAYER_RTOL * largest, (rank, name, diff, largest)


def test_async_sends_each_projection_on_its_own(layer_job):
    """Fused: one all-to-all there and one back per mixer; async: one per projection (q, k, v
    for attention; q, k, v, b, a for Gated DeltaNet) and one back."""
    counts = {case: {r["collectives"] for r in layer_job[case]} for case in LAYER_CASES}
    assert counts["attention_ulysses"] == {2} and counts["attention_ulysses_async"] == {4}
    assert counts["gdn_ulysses"] == {2} and counts["gdn_ulysses_async"] == {6}
    assert counts["attention_allgather"] == {2}  # K and V
    assert counts["gdn_p2p"] == {2}  # the convolution's halo and the state maps


@pytest.mark.parametrize("case", ["attention_ulysses", "attention_allgather", "gdn_ulysses",
                                  "gdn_p2p"])
def test_a_later_token_never_moves_an_earlier_output(layer_job, case):
    reports = layer_job[f"causal_{case}"]
    assert all(r["before"] == 0.0 for r in reports), reports
    moved = [r["after"] for r in reports if r["after"] is not None]
    assert moved and all(after > 0 for after in moved), reports


# ====================================================================== whole runs
def _write_recipe(folder: Path) -> list[str]:
    from hyper_parallel.codegen.__main__ import main

    folder.mkdir(parents=True)
    yaml_path = folder / "cp_layouts.yaml"
    # The other forms: all-gather attention, state-passing Gated DeltaNet, async all-to-alls.
    yaml_path.write_text(CP_YAML + "  accelerator: {cp: 2, ulysses_degree: 1, "
                         "linear_attention_cp_mode: p2p, async_cp: true}\n")
    assert main(["--from-yaml", str(yaml_path), "-o", str(folder / "cp_layouts.py")]) == 0
    base = folder / "base.yaml"
    base.write_text(CP_YAML)
    return [str(yaml_path), str(base), str(folder)]


def _write_packed(folder: Path) -> str:
    """A legacy YAML of the tiny flavor, ``block_causal``, replaying packed rows
    (``preset_pt``): 16 rows of 512 tokens of documents 2 to 150 tokens long, positions
    restarting at each, each document's first label ignored (``DataCollatorWithFlattening``'s
    rows). At the shard boundary (256): row 0 begins a document exactly there, row 1 one
    token before it, row 2 two before it (inside the convolution's window) after a document
    of 2 tokens (shorter than the window), row 3 crosses it with a document of 300 tokens."""
    import torch

    folder.mkdir(parents=True)
    generator = torch.Generator().manual_seed(46)
    forced = {0: (100, 156), 1: (255,), 2: (252, 2), 3: (100, 300)}
    rows = []
    for row in range(16):
        lengths = list(forced.get(row, ()))
        while sum(lengths) < 512:
            lengths.append(min(512 - sum(lengths),
                               int(torch.randint(2, 151, (), generator=generator))))
        rows.append(torch.cat([torch.arange(n) for n in lengths]))
    positions = torch.stack(rows)
    ids = torch.randint(0, 2048, positions.shape, generator=generator)
    path = folder / "packed.pt"
    torch.save([{"input_ids": ids, "labels": ids.masked_fill(positions == 0, -100),
                 "position_ids": positions}], path)
    yaml_path = folder / "packed.yaml"
    yaml_path.write_text(CP_YAML.replace(
        "config_overrides: {flavor: tiny}",
        "config_overrides: {flavor: tiny, attn_mask_type: block_causal}").replace(
        "  type: dummy\n", f"  type: preset_pt\n  train_path: {path}\n  shuffle: false\n"))
    return str(yaml_path)


@pytest.fixture(scope="module")
def runs(layouts, run_once) -> dict:
    cp_yaml, base, folder = run_once.get("cp layouts recipe", _write_recipe)
    packed = run_once.get("cp packed rows", _write_packed)
    cases = {
        "1 rank packed": Case((packed,), ONE_RANK, env=NUMERICS),
        "1 rank": Case((base,), ONE_RANK, env=NUMERICS),
        "1 rank bf16": Case((base, BF16), ONE_RANK),
        "CP 2 bf16": Case((base, BF16), Layout(cp=2)),
        "legacy CP yaml": Case((cp_yaml,), Layout(cp=2), argv_sets_layout=True, env=NUMERICS),
        "CP recipe": Case(("--module", "cp_layouts", "--config", "cp_layouts"), Layout(cp=2),
                          argv_sets_layout=True, pythonpath=(folder,), env=NUMERICS),
    }
    for name, (overrides, layout, _) in LAYOUTS.items():
        cases[name] = Case((base, *overrides), layout, env=NUMERICS)
    for name, (overrides, layout) in PACKED_LAYOUTS.items():
        cases[name] = Case((packed, *overrides), layout, env=NUMERICS)
    return layouts.run_cases(cases, params=False)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_context_parallel_layouts_train_the_one_rank_run(name, runs):
    assert runs[name].error is None, runs[name].error
    worst = assert_same_run(runs[name], runs["1 rank"], rtol=LAYOUTS[name][2])
    print(f"{name}: worst relative difference from one rank {worst}")


@pytest.mark.parametrize("name", list(PACKED_LAYOUTS))
def test_packed_runs_under_context_parallelism_train_the_one_rank_packed_run(name, runs):
    """Packed rows whose documents cross, begin at and begin just before the shard boundary,
    through the trainer (its split hands each rank its part of the whole rows' documents):
    Ulysses, and all-gather attention with state passing, train the one-rank packed run; so
    do pipeline stages of Ulysses, the schedule cutting each shard's documents with its rows
    into the pipeline's micro-batches."""
    assert runs["1 rank packed"].error is None, runs["1 rank packed"].error
    assert runs[name].error is None, runs[name].error
    worst = assert_same_run(runs[name], runs["1 rank packed"], rtol=CP_RUN_RTOL)
    print(f"{name}: worst relative difference from one rank {worst}")


def test_mixed_precision_under_context_parallelism(runs):
    worst = assert_same_run(runs["CP 2 bf16"], runs["1 rank bf16"], rtol=CP_BF16_RTOL)
    print(f"CP 2 bf16: worst relative difference from one rank {worst}")


@pytest.fixture(scope="module")
def resumed(layouts, run_once, runs):
    """CP 2's step-2 checkpoint resumed on one rank (DCP reshards the FSDP shards over the cp
    ranks; the data position is the data-parallel rank's, which the cp ranks share)."""
    _, base, _ = run_once.get("cp layouts recipe", _write_recipe)
    step_2 = runs["CP 2"].checkpoint_folder / "step_2"
    case = Case((base, f"--train.checkpoint.load_path={step_2}"), ONE_RANK, env=NUMERICS)
    return layouts.run_cases({"resumed": case}, params=False)["resumed"]


def test_a_context_parallel_checkpoint_resumes_on_one_rank(runs, resumed):
    assert resumed.error is None, resumed.error
    assert resumed.steps == [3, 4]
    reference = runs["1 rank"].losses[2:]
    for got, want in zip(resumed.losses, reference):
        assert abs(got - want) <= CP_RUN_RTOL * abs(want), (resumed.losses, reference)


def test_legacy_cp_yaml_and_its_recipe_are_one_run(runs):
    """The YAML runs the other forms (all-gather attention, state passing, async): it trains
    the one-rank run too, and its recipe trains it bit for bit."""
    worst = assert_same_run(runs["legacy CP yaml"], runs["1 rank"], rtol=CP_RUN_RTOL)
    print(f"legacy CP yaml (all-gather, p2p, async): worst relative difference {worst}")
    assert_same_run(runs["CP recipe"], runs["legacy CP yaml"], rtol=0)
    assert len(runs["CP recipe"].losses) == 4


def test_native_figures_are_recorded_on_request(runs):
    """With ``HYPER_PARALLEL_GOLDEN_NUMERICS=native HYPER_PARALLEL_UPDATE_GOLDEN=1``: every run
    held to :data:`CP_RUN_RTOL`, measured on this machine's native kernels, within it (the
    tests above), its worst differences recorded as this machine's :data:`NATIVE_FIGURES`.
    Otherwise it only checks what the module ran on."""
    held = {name: runs["1 rank"] for name in (*LAYOUTS, "legacy CP yaml")}
    held.update({name: runs["1 rank packed"] for name in PACKED_LAYOUTS})
    figures = {name: assert_same_run(runs[name], reference, rtol=CP_RUN_RTOL)
               for name, reference in held.items()}
    if os.environ.get("HYPER_PARALLEL_UPDATE_GOLDEN") == "1" and dict(NUMERICS) == dict(
            NATIVE_ENV):
        record_native_figures(NATIVE_FIGURES, figures,
                              "tests/torch/st/qwen3_5/test_context_parallel.py, "
                              "HYPER_PARALLEL_GOLDEN_NUMERICS=native")
    assert NUMERICS in (PINNED_ENV, NATIVE_ENV)
