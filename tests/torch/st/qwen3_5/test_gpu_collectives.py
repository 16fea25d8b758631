"""The trainer on a GPU cluster, checked on this CPU machine: every collective of a training
step, an evaluation, a save and a resume gets a tensor NCCL would serve.

Each layout runs as a 2-rank CUDA job simulated by ``tests/helpers/fake_cuda`` (one process per
rank, the fake process group registered for ``cuda`` alone, fake CUDA tensors): the real
``build_trainer`` of a recipe, steps with evaluation and a checkpoint, then (for some) a second
trainer resuming from that checkpoint. A host tensor handed to any collective fails the job
with NCCL's own error, "No backend type associated with device type cpu" -- which the code
before ``platform/collectives.py`` did at the first step (``runtime/step.py``'s token count).

The layouts cover the data-parallel (FSDP), tensor-, context- (both forms), expert- and
pipeline-parallel groups; the test reads which mesh groups each rank's collectives ran on.
Three of them also export the Hugging Face checkpoint (streamed, sharded) after each run.
What the simulation stands in for (values, DCP's data path, object collectives through files)
is listed in the harness's docstring.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.torchrun import REPO, spawn_ranks

pytestmark = pytest.mark.slow

WORKER = REPO / "tests" / "helpers" / "fake_cuda" / "worker.py"
#: The debug recipes with 4 layers (the tiny flavor; the MoE debug model's first 4): 3 Gated
#: DeltaNet layers and a full-attention one, every layer kind and so every collective a layer
#: issues, at half the 8 layers' cost (a fake step costs per op, whatever the widths).
DENSE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
         "--model.config_overrides={flavor: tiny}"]
MOE_EP2 = ["--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel_ep2",
           "--model.config_overrides={num_hidden_layers: 4}"]
#: One micro-batch of 2 rows a step where the layout has one data-parallel rank: the recipes'
#: 4 rows a step would accumulate 2, which TP 2 and PP 2 keep (a second micro-batch runs the
#: first one's code again; the accumulation's own collectives, the step's token count and
#: gradient norm, are the step's, made once either way).
ONE_MICRO_BATCH = ["--training.global_batch_size=2"]

#: name -> (command line, the mesh groups its collectives must reach, resume from step 1 and
#: export the Hugging Face checkpoint at both runs' ends)
LAYOUTS: dict[str, tuple[list[str], set[str], bool]] = {
    "FSDP 2": (DENSE + ["--parallelism.data_parallel_shard_degree=2"], {"dp_shard", "loss"},
               True),
    "TP 2": (DENSE + ["--parallelism.tensor_parallel_degree=2"], {"tp"}, False),
    "CP 2 Ulysses": (DENSE + ONE_MICRO_BATCH + ["--parallelism.context_parallel_degree=2"],
                     {"cp", "loss"}, False),
    "CP 2 state passing": (
        DENSE + ONE_MICRO_BATCH + ["--parallelism.context_parallel_degree=2",
                 "--parallelism.context_parallel_ulysses_degree=1",
                 "--parallelism.context_parallel_linear_attention_mode=p2p"],
        {"cp", "loss"}, False),
    "EP 2": (MOE_EP2 + ONE_MICRO_BATCH, {"ep", "loss"}, True),
    "PP 2": (DENSE + ["--parallelism.pipeline_parallel_degree=2",
                      "--parallelism.num_pp_microbatches=2"], {"pp"}, True),
}


def _simulate(root: Path) -> dict[str, dict[str, dict]]:
    """Every layout, both ranks, in one launch: ``{layout: {rank: the worker's record}}``."""
    root.mkdir(parents=True)
    # The shipped corpus's first rows (each build tokenizes its files whole): enough for a run
    # and its resumption to train a step each (the test checks that they did), and for an
    # evaluation of one batch of 2 on each of 2 data-parallel ranks.
    corpus = REPO / "hyper_parallel" / "assets" / "corpus"
    data = {}
    for name, rows in (("train", 16), ("valid", 4)):
        data[name] = root / f"{name}.jsonl"
        lines = (corpus / f"{name}.jsonl").read_text().splitlines(keepends=True)
        data[name].write_text("".join(lines[:rows]))
    cases = []
    for index, (name, (argv, _, resume)) in enumerate(LAYOUTS.items()):
        folder = root / f"case{index}"
        cases.append({
            "name": name,
            "argv": argv + [
                f"--checkpoint.folder={folder / 'ckpt'}", "--checkpoint.interval=1",
                "--training.steps=1", f"--dataloader.dataset_path={data['train']}",
                "--validation.freq=1", f"--validation.dataset_path={data['valid']}",
                "--metrics.log_freq=1",
            ] + ([
                "--checkpoint.export_hf=true", "--checkpoint.export_hf_max_shard_size=200KB",
            ] if resume else []),
            "resume_steps": 2 if resume else 0,
            "mailbox": str(folder / "mailbox"),
            "out": str(folder),
        })
    plan = root / "plan.json"
    plan.write_text(json.dumps({"cases": cases}))
    spawn_ranks(WORKER, [str(plan)], nproc=2, timeout=600)
    return {
        case["name"]: {
            str(rank): json.loads((Path(case["out"]) / f"rank{rank}.json").read_text())
            for rank in (0, 1)
        }
        for case in cases
    }


@pytest.fixture
def simulated_jobs(run_once) -> dict[str, dict[str, dict]]:
    """The one launch, shared by the session's xdist workers."""
    return run_once.get(("fake_cuda layouts", sorted(LAYOUTS)), _simulate)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_collective_gets_a_tensor_nccl_serves(simulated_jobs, layout):
    _, groups, resume = LAYOUTS[layout]
    for rank, record in simulated_jobs[layout].items():
        # Each run trained one step and evaluated after it: the resumed one step 2 itself.
        runs = {"train": 1, "resume": 2} if resume else {"train": 1}
        for run, step in runs.items():
            done = record[run]
            assert (done["steps"], len(done["trained"]), done["evaluated"]) == (step, 1, [step]), (
                rank, run, done)
            if layout in ("TP 2", "PP 2"):  # gradient accumulation: see ONE_MICRO_BATCH
                assert done["trained"] == [2], (rank, run, done)
            reached = set(done["collectives"])
            assert groups <= reached, f"rank {rank}, {run}: collectives reached {sorted(reached)}"
    if resume:
        folder = Path(simulated_jobs[layout]["0"]["train"]["folder"])
        for step in (1, 2):
            index = json.loads((folder / f"step_{step}" / "hf_ckpt" /
                                "model.safetensors.index.json").read_text())
            assert len(set(index["weight_map"].values())) > 1, index  # sharded, written


def test_the_fake_group_refuses_a_host_tensor_as_nccl_does(tmp_path):
    """The check has teeth: in the simulated job, a collective on a CPU tensor fails with
    NCCL's error, and one on a tensor from ``platform.collectives`` passes."""
    script = tmp_path / "host_tensor.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(REPO / 'tests' / 'helpers')!r})\n"
        "import torch, torch.distributed as dist\n"
        "from fake_cuda import fake_cuda_rank\n"
        "from hyper_parallel.platform.collectives import all_reduce_sum, comm_tensor\n"
        f"with fake_cuda_rank(int(os.environ['RANK']), 2, {str(tmp_path / 'mail')!r}):\n"
        "    assert all_reduce_sum(comm_tensor([3], dtype=torch.int64), dist.group.WORLD)"
        ".device.type == 'cuda'\n"
        "    try:\n"
        "        dist.all_reduce(torch.tensor([3]))\n"
        "    except RuntimeError as e:\n"
        "        assert 'No backend type associated with device type cpu' in str(e), e\n"
        "    else:\n"
        "        raise AssertionError('a host tensor passed')\n"
        "from hyper_parallel.utils.process import exit_now\n"
        "exit_now(0)\n"
    )
    spawn_ranks(script, nproc=2, timeout=300)
