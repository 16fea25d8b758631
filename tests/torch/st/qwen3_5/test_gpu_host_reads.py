"""The image-text model's training step on a GPU cluster, checked on this CPU machine: the
forward and the backward never make the host wait for the device.

A device value read on the host (``.item()``, ``.tolist()``, a copy to the host) or a blocking
copy to the device waits for everything the device has queued: once per micro-batch, on every
rank, it drains the pipeline the host keeps ahead of the GPU. The step runs as a 2-rank FSDP
CUDA job simulated by ``tests/helpers/fake_cuda`` (its ``recording_transfers`` records every
host/device crossing the dispatcher sees, with the scope it happened in: a model part's forward,
FSDP's root pre-forward included, the vision tower's forward, the step's backward): the debug
image-text recipe (``qwen3_5_v2_debugmodel_vl``, its decoder's first 4 layers, the shipped chat
corpus, an image in every row), two micro-batches of two rows per rank, then the same rows
without their images (the tower runs idle).

Before ``HostTensor``, FSDP's root pre-forward moved ``image_grid_thw`` to the device (a
blocking copy in the forward) and the tower read it back as ints (``vision_positions.py:
image_grids``: three reads per image), then copied its position tables over, three blocking
copies, image-less micro-batches included.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers.torchrun import REPO, spawn_ranks

pytestmark = pytest.mark.slow

WORKER = REPO / "tests" / "helpers" / "fake_cuda" / "host_reads_worker.py"

#: The step's host reads by design, all outside the forward and the backward (function of the
#: innermost product frame -> reads per step): the step's token count, summed over the
#: data-parallel ranks before the first forward (``platform/collectives.sum_counts``), and
#: after the last backward the gradient norm (``float(clip_fn(...))``) and the loss report
#: (``.item()``) that ``train_step`` returns.
BY_DESIGN = {"sum_counts": 1, "train_step": 2}

#: The scopes of the hot path (see ``host_reads_worker.py``).
HOT = ("forward", "tower", "backward")


ARGV = (
    "--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_vl",
    "--parallelism.data_parallel_shard_degree=2",
    # The debug decoder's first 4 layers: 3 Gated DeltaNet and a full-attention one, every
    # layer kind (a read in a layer shows in each layer of its kind), and the whole tower.
    "--model.config_overrides={num_hidden_layers: 4}",
    # 8 rows of 2 per micro-batch over 2 ranks: 2 micro-batches a rank and step, each with
    # the images of 2 rows.
    "--training.global_batch_size=8", "--training.local_batch_size=2", "--training.steps=1",
    "--checkpoint.export_hf=false",
)


def _record(root: Path) -> dict[str, dict]:
    root.mkdir(parents=True)
    argv = [*ARGV, f"--checkpoint.folder={root / 'ckpt'}"]
    spawn_ranks(WORKER, [str(root / "out"), str(root / "mailbox"), *argv], nproc=2,
                timeout=600)
    return {rank: json.loads((root / "out" / f"rank{rank}.json").read_text())
            for rank in ("0", "1")}


@pytest.fixture
def recorded(run_once) -> dict[str, dict]:
    """Both ranks' records of the FSDP 2 job: ``{rank: {"image_step", "text_step", "error"}}``
    (one job a session, shared by its xdist workers)."""
    return run_once.get(("fake_cuda host reads", ARGV), _record)


def _function(transfer: dict) -> str:
    return transfer["where"].rsplit("(", 1)[-1].rstrip(")")


def _listing(transfers: list[dict]) -> str:
    counts = Counter((t["scope"], t["kind"], t["op"], t["where"], t["non_blocking"])
                     for t in transfers)
    return "\n".join(f"  {n} x {key}" for key, n in sorted(counts.items(), key=str))


@pytest.mark.parametrize("step", ["image_step", "text_step"])
def test_no_host_read_or_blocking_copy_in_the_forward_and_backward(recorded, step):
    """No crossing at all in the forward (FSDP's input handling included), the tower or the
    backward, with images and without; before and after them, only the step's own reads."""
    for rank, record in recorded.items():
        seen = record[step]
        hot = [t for t in seen if t["scope"] in HOT]
        assert not hot, (f"rank {rank}, {step}: host/device crossings in the hot path:\n"
                         f"{_listing(hot)}\n{record['error'] or ''}")
        assert record["error"] is None, record["error"]
        reads = Counter(_function(t) for t in seen if t["kind"] == "read")
        assert reads == BY_DESIGN, (f"rank {rank}, {step}: host reads {dict(reads)}, by design "
                                    f"{BY_DESIGN}:\n{_listing(seen)}")


def test_the_tower_makes_no_copy_with_images_or_without(recorded):
    """The tower builds its position tables on the device from the grids' ints: it ran on
    each micro-batch of both steps and copied nothing to the device in either."""
    for rank, record in recorded.items():
        for step in ("image_step", "text_step"):
            assert record["scopes"][step].get("tower") == 2, (rank, step, record["scopes"])
            uploads = [t for t in record[step]
                       if t["kind"] == "upload" and t["scope"] == "tower"]
            assert not uploads, f"rank {rank}, {step}:\n{_listing(uploads)}"


def test_the_check_sees_a_host_read_in_the_tower(tmp_path):
    """The check has teeth: a ``.tolist()`` of a device tensor and a blocking copy to the
    device, made in the scope, are recorded as a read and an upload there."""
    script = tmp_path / "teeth.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(REPO / 'tests' / 'helpers')!r})\n"
        "import torch\n"
        "from fake_cuda import fake_cuda_rank\n"
        f"with fake_cuda_rank(0, 1, {str(tmp_path / 'mail')!r}) as mode:\n"
        "    with mode.recording_transfers() as seen:\n"
        "        mode.scope = 'tower'\n"
        "        grid = torch.ones(2, 3, dtype=torch.long).to('cuda', non_blocking=True)\n"
        "        grid.tolist()\n"
        "        torch.ones(4).to('cuda')\n"
        "        mode.scope = None\n"
        "    kinds = [(t.kind, t.non_blocking, t.scope) for t in seen]\n"
        "    assert kinds == [('upload', True, 'tower')] + [('read', False, 'tower')] * 6 + "
        "[('upload', False, 'tower')], kinds\n"
        "from hyper_parallel.utils.process import exit_now\n"
        "exit_now(0)\n"
    )
    spawn_ranks(script, nproc=1, timeout=300)
