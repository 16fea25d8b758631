"""Pipeline parallelism trains the run one rank trains, in both worlds, and its checkpoints
move between pipeline degrees.

One workload -- the tiny flavor (4 layers: 3 Gated DeltaNet, 1 gated attention) on synthetic
tokens, 4 steps of 4 sequences in micro-batches of 2 (two accumulation steps), warmup and
decay, clipping at a norm no step reaches -- trains on 1 rank and on the pipeline layouts
below (the layout harness, :mod:`tests.helpers.layout`: one job per world size).

* **Bit for bit**: PP 2 with the step's two micro-batches (``num_pp_microbatches: 2``) under
  GPipe and 1F1B computes exactly what one rank computes with them as gradient accumulation:
  the same rows, the same loss scaling before the backward, the gradients accumulated in the
  same order. Losses are bit-identical; gradient norms are within
  :data:`PP_GRAD_NORM_RTOL` (each stage's norm is reduced over the pipeline ranks, so the
  squares are summed in another order).
* **Within bounds** (:data:`PP_LAYOUT_RTOL`): interleaved virtual stages, PP 2 x FSDP 2,
  PP 2 x HSDP 2x2 (8 ranks) and PP 2 x TP 2 (the data-parallel and tensor-parallel reductions
  sum in another order), full
  activation checkpointing, bf16 mixed precision against one rank's, and the tied embedding of the 0.8b-style flavors (the shared weight's gradient is summed between the
  first and the last stage).
* **One run, two entries**: the legacy PP YAML and the recipe ``--from-yaml`` writes for it.
* **Checkpoints across layouts**: a run saved at step 2 at pp = 2 resumes at pp = 1 and at
  pp = 4, one saved at pp = 1 and one saved at pp = 4 resume at pp = 2, each continuing with
  the losses of the uninterrupted run.
* **Packed rows** (``block_causal``, :mod:`tests.helpers.packed_rows`): each pipeline
  micro-batch carries its own rows' documents through the schedule to every stage; GPipe and
  1F1B with the step's two micro-batches train the one-rank packed run bit for bit, as they
  do unpacked rows, and the interleaved schedule (two stages a rank) within
  :data:`PP_LAYOUT_RTOL`.
* **Hugging Face export** (at the end of training, the default ``export_hf_policy``, streamed
  unit by unit, each stage's files written by the rank that holds it): a file per stage and
  an index, the weights of the run's last checkpoint, transformers' logits of the trained
  model (the tied head too); the PP 2 export is the 1-rank export, tensor for tensor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.hf_export_check import assert_export_is_the_model, check_layout
from tests.helpers.layout import ONE_RANK, Case, Layout, assert_same_run
from tests.helpers.packed_rows import packed_workload

pytestmark = pytest.mark.slow

#: The legacy YAML; the harness adds each layout's degrees on the command line.
PP_YAML = """\
model:
  name: qwen3_5
  config_overrides: {flavor: tiny}
data:
  type: dummy
  max_seq_len: 32
train:
  max_steps: 4
  global_batch_size: 4
  micro_batch_size: 2
  optimizer: {lr: 1.0e-3, lr_warmup_ratio: 0.25, max_grad_norm: 100.0}
  logging: {log_steps: 1}
  checkpoint: {save_steps: 0, save_hf_weights: false}
  debug: {deterministic: true}
"""
#: Overrides of the legacy command line, per case.
PP = "--train.accelerator.pp_micro_batch_num=2"
SCHEDULE = "--train.accelerator.pp_schedule="
#: A checkpoint halfway (the resumes start from it) and at the end, with the HF export.
SAVE_HALFWAY = ("--train.checkpoint.save_steps=2", "--train.checkpoint.save_hf_weights=true")
TIED = "--model.config_overrides={flavor: tiny, tie_word_embeddings: true}"

#: Between layouts that sum in another order. Losses: measured 1e-7 at worst over 8 steps.
PP_LAYOUT_RTOL = 1e-6
#: A gradient norm is summed over the stages (and shards), in float32: measured 3e-7.
PP_GRAD_NORM_RTOL = 1e-5

#: The layouts within bounds: name -> (overrides, layout). The bit-identical GPipe and 1F1B runs
#: are cases below that also save (a save changes no loss) and the legacy PP YAML.
LAYOUTS = {
    "PP 2 interleaved": ((PP, "--train.accelerator.pp_vpp=2"), Layout(pp=2)),
    "PP 2 x FSDP 2": ((PP,), Layout(dp_shard=2, pp=2)),
    "PP 2 x TP 2": ((PP,), Layout(tp=2, pp=2)),
    # Four data-parallel ranks of one row each: one pipeline micro-batch a step, which GPipe
    # runs (1F1B needs one per stage).
    "PP 2 x HSDP 2x2": (("--train.micro_batch_size=1", "--train.accelerator.pp_micro_batch_num=1",
                         SCHEDULE + "gpipe"), Layout(dp_replicate=2, dp_shard=2, pp=2)),
    # The legacy trainer refused activation checkpointing under PP.
    "PP 2 full AC": ((PP, "--train.gradient_checkpointing.activation_checkpoint=full"),
                     Layout(pp=2)),
}
BF16 = "--train.mixed_precision.enabled=true"
#: The packed workload's pipeline cases (name -> (overrides, layout, rtol)): the step's two
#: micro-batches of 2 rows, one stage a rank (bit for bit) or two (interleaved).
PACKED = {
    "packed PP 2 GPipe": ((PP, SCHEDULE + "gpipe"), Layout(pp=2), 0),
    "packed PP 2 1F1B": ((PP, SCHEDULE + "1f1b"), Layout(pp=2), 0),
    "packed PP 2 interleaved": ((PP, "--train.accelerator.pp_vpp=2"), Layout(pp=2),
                                PP_LAYOUT_RTOL),
}


def _write_recipe(folder: Path) -> list[str]:
    from hyper_parallel.codegen.__main__ import main

    folder.mkdir(parents=True)
    yaml_path = folder / "pp_layouts.yaml"
    yaml_path.write_text(PP_YAML + "  accelerator: {pp: 2, pp_micro_batch_num: 2}\n")
    assert main(["--from-yaml", str(yaml_path), "-o", str(folder / "pp_layouts.py")]) == 0
    base = folder / "base.yaml"
    base.write_text(PP_YAML)
    return [str(yaml_path), str(base), str(folder)]


@pytest.fixture(scope="module")
def files(run_once):
    """The PP YAML, the workload's YAML and the folder of the recipe ``--from-yaml`` wrote for
    the PP YAML, made once per session (the cases' command lines are the harness's keys)."""
    pp_yaml, base, folder = run_once.get("pp layouts recipe", _write_recipe)
    return Path(pp_yaml), Path(base), Path(folder)


@pytest.fixture(scope="module")
def runs(layouts, files, run_once) -> dict:
    """Every uninterrupted case, and the saves the resumes start from: one job per world."""
    pp_yaml, base, folder = files
    packed = packed_workload(run_once)["packed.yaml"]
    cases = {
        "1 rank": Case((str(base), *SAVE_HALFWAY), ONE_RANK),
        "1 rank tied": Case((str(base), TIED), ONE_RANK),
        "PP 2 tied": Case((str(base), TIED, PP, *SAVE_HALFWAY), Layout(pp=2)),
        "1 rank bf16": Case((str(base), BF16), ONE_RANK),
        "PP 2 bf16": Case((str(base), BF16, PP), Layout(pp=2)),
        "legacy PP yaml": Case((str(pp_yaml),), Layout(pp=2), argv_sets_layout=True),
        "PP recipe": Case(("--module", "pp_layouts", "--config", "pp_layouts"), Layout(pp=2),
                          argv_sets_layout=True, pythonpath=(str(folder),)),
        "PP 2 GPipe": Case((str(base), PP, SCHEDULE + "gpipe", *SAVE_HALFWAY), Layout(pp=2)),
        "save PP 4": Case((str(base), "--train.accelerator.pp_micro_batch_num=4", *SAVE_HALFWAY),
                          Layout(pp=4)),
    }
    for name, (overrides, layout) in LAYOUTS.items():
        cases[name] = Case((str(base), *overrides), layout)
    cases["packed 1 rank"] = Case((str(packed),), ONE_RANK)
    for name, (overrides, layout, _) in PACKED.items():
        cases[name] = Case((str(packed), *overrides), layout)
    return layouts.run_cases(cases, params=False)


@pytest.fixture(scope="module")
def resumed(layouts, files, runs) -> dict:
    """``{(saved at, resumed at): LayoutRun}``: each resumes the step-2 checkpoint of a save."""
    _, base, _ = files
    plans = {("PP 2 GPipe", "1 rank"): ONE_RANK, ("PP 2 GPipe", "PP 4"): Layout(pp=4),
             ("1 rank", "PP 2"): Layout(pp=2), ("PP 4", "PP 2"): Layout(pp=2)}
    saves = {"PP 2 GPipe": "PP 2 GPipe", "1 rank": "1 rank", "PP 4": "save PP 4"}
    micro = {1: (), 2: (PP,), 4: ("--train.accelerator.pp_micro_batch_num=4",)}
    cases = {}
    for (saved, at), layout in plans.items():
        step_2 = runs[saves[saved]].checkpoint_folder / "step_2"
        cases[saved, at] = Case(
            (str(base), *micro[layout.pp], f"--train.checkpoint.load_path={step_2}"), layout)
    return layouts.run_cases(cases, params=False)


@pytest.mark.parametrize("name", ["PP 2 GPipe", "legacy PP yaml"])
def test_gpipe_and_1f1b_train_the_one_rank_run_bit_for_bit(name, runs):
    """The legacy PP YAML runs the default schedule, 1F1B."""
    worst = assert_same_run(runs[name], runs["1 rank"], rtol=0, grad_norm_rtol=PP_GRAD_NORM_RTOL)
    print(f"{name} vs 1 rank, worst relative differences:", worst)


@pytest.mark.parametrize("name", LAYOUTS)
def test_pipeline_layouts_train_the_one_rank_run(name, runs):
    worst = assert_same_run(runs[name], runs["1 rank"], rtol=PP_LAYOUT_RTOL,
                            grad_norm_rtol=PP_GRAD_NORM_RTOL)
    print(f"{name} vs 1 rank, worst relative differences:", worst)


def test_tied_embeddings_under_pipeline_parallelism(runs):
    """The head and the embedding on different ranks stay one weight: its copies' gradients
    are summed, so PP 2 trains the tied one-rank run."""
    assert_same_run(runs["PP 2 tied"], runs["1 rank tied"], rtol=PP_LAYOUT_RTOL,
                    grad_norm_rtol=PP_GRAD_NORM_RTOL)
    assert runs["PP 2 tied"].losses != runs["PP 2 GPipe"].losses  # the tie is real


def test_mixed_precision_under_pipeline_parallelism(runs):
    """Each stage is wrapped by FSDP2 for its bf16 policy, as one rank is: the same casts."""
    assert_same_run(runs["PP 2 bf16"], runs["1 rank bf16"], rtol=PP_LAYOUT_RTOL,
                    grad_norm_rtol=PP_GRAD_NORM_RTOL)
    assert runs["PP 2 bf16"].losses != runs["PP 2 GPipe"].losses  # bf16 is really on


def test_legacy_pp_yaml_and_its_recipe_are_one_run(runs):
    assert_same_run(runs["PP recipe"], runs["legacy PP yaml"], rtol=0)


@pytest.mark.parametrize("saved, at", [("PP 2 GPipe", "1 rank"), ("PP 2 GPipe", "PP 4"),
                                       ("1 rank", "PP 2"), ("PP 4", "PP 2")])
def test_checkpoints_resume_on_another_pipeline_degree(saved, at, runs, resumed):
    run = resumed[saved, at]
    assert run.error is None, run.error
    assert run.steps == [3, 4]
    reference = runs["1 rank"]
    for got, want in zip(run.losses, reference.losses[2:]):
        assert abs(got - want) <= PP_LAYOUT_RTOL * abs(want), (saved, at, run.losses,
                                                              reference.losses[2:])


@pytest.mark.parametrize("name, stages", [("1 rank", 1), ("PP 2 GPipe", 2), ("save PP 4", 4),
                                          ("PP 2 tied", 2)])
def test_hf_export_is_the_trained_model(name, stages, runs):
    """Saved at steps 2 and 4, exported once, at the end: one file per stage (the writer of a
    stage's files is the rank that holds it), the step-4 checkpoint's weights, its logits."""
    run = runs[name]
    assert run.error is None, run.error
    assert sorted(p.parent.name for p in run.checkpoint_folder.glob("step_*/hf_ckpt")) == [
        "step_4"]
    step_4 = run.checkpoint_folder / "step_4"
    result = assert_export_is_the_model(step_4 / "hf_ckpt", step_4)
    print(f"{name}: {result}")
    assert result["files"] == stages


def test_hf_export_under_pipeline_parallelism_is_the_whole_model(runs):
    """Every rank holds some stages; the export streams them: the 1-rank export's tensors."""
    import torch

    ours = check_layout(runs["PP 2 GPipe"].checkpoint_folder / "step_4" / "hf_ckpt")
    ref = check_layout(runs["1 rank"].checkpoint_folder / "step_4" / "hf_ckpt")
    assert sorted(ours) == sorted(ref)
    for name, tensor in ref.items():
        assert torch.equal(ours[name], tensor), name


@pytest.mark.parametrize("name", PACKED)
def test_packed_rows_keep_their_documents_through_the_pipeline(name, runs):
    """``block_causal`` under pipeline parallelism: every stage reads its micro-batch's own
    documents (made on the host, cut with the rows by the schedule), so the pipeline trains
    the one-rank packed run: bit for bit with one stage a rank, as unpacked rows."""
    rtol = PACKED[name][2]
    worst = assert_same_run(runs[name], runs["packed 1 rank"], rtol=rtol,
                            grad_norm_rtol=PP_GRAD_NORM_RTOL)
    print(f"{name} vs packed 1 rank, worst relative differences:", worst)
