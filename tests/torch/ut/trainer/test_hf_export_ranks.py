"""The Hugging Face export across ranks (4 gloo ranks, one torchrun job): the files are spread
over the ranks, each tensor goes to the rank that writes it alone, and the export is the one
one process writes, bit for bit, in the dtype asked for.

Run as a script under torchrun (``spawn_ranks(this file, [out_dir], nproc=4)``) this file is
also the job's worker. Its layouts of a tiny Qwen3.5 (untied: the head is a tensor of its own):

* ``fsdp4``: FSDP over the 4 ranks, 30 KB files, the model's dtype (fp32);
* ``fsdp2_tp2``: TP 2 inside FSDP 2 (the 2-D ``_StridedShard`` layout), written in bf16;
* ``tp2``: TP 2 alone, so each TP pair is a replica of the other (a mesh without a file's
  writer sends nothing);
* ``source``: FSDP 4 from a bf16 source checkpoint (``DtypeRule(source=...)``: bf16 files), the
  gathers cut into pieces of a few hundred bytes.

Each rank records the files it opened, whether it ever held a whole tensor it does not write
(``_gathered``'s result) and every ``DTensor.full_tensor()`` (the all-gather onto every rank
that the export used before). ``gather_to`` itself is checked against ``full_tensor()`` on
2-D meshes, uneven shards, a replicated dimension and a 0-d tensor.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.torchrun import spawn_ranks

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.slow]

SHARD_BYTES = 30_000
RANKS = 4
LAYOUTS = ("fsdp4", "fsdp2_tp2", "tp2", "source")


def _model():
    from hyper_parallel.models.qwen3_5.configuration import FLAVORS
    from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter

    config = FLAVORS["tiny"]
    torch.manual_seed(5)
    model = Qwen3_5ForCausalLM(config)
    model.init_weights()
    with torch.no_grad():  # every weight distinct (init_weights leaves norms at one value)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    return model, Qwen3_5StateDictAdapter, config


def _rule(layout: str, source: str):
    from hyper_parallel.runtime.checkpoint.carried import source_dtypes
    from hyper_parallel.runtime.checkpoint.hf_plan import DtypeRule

    if layout == "fsdp2_tp2":
        return DtypeRule(cast="BF16")
    if layout == "source":
        return DtypeRule(source=source_dtypes(source))
    return DtypeRule()


# ------------------------------------------------------------------------------------ worker
def _check_gather_to(rank: int) -> list[str]:
    """``gather_to`` against ``full_tensor()``: the writer's copy equals it, bit for bit, in the
    asked dtype; every other rank gets None. Returns the failures."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard

    from hyper_parallel.runtime.checkpoint import hf_gather

    mesh1 = init_device_mesh("cpu", (RANKS,))
    mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b"))
    g = torch.Generator().manual_seed(3)
    cases = [
        (mesh1, (Shard(0),), (7, 3)),            # uneven: 2, 2, 2, 1 rows
        (mesh1, (Shard(0),), (2, 5)),            # ranks 2 and 3 hold nothing
        (mesh1, (Shard(1),), (3, 9)),
        (mesh1, (Replicate(),), ()),             # 0-d
        (mesh1, (Shard(0),), (0, 4)),            # empty
        (mesh2, (Shard(0), Shard(1)), (5, 7)),
        (mesh2, (Replicate(), Shard(0)), (6, 2, 3)),
        (mesh2, (Shard(1), Replicate()), (4, 5)),
        (mesh2, (Shard(0), Shard(0)), (9, 2)),
        (mesh2, (_StridedShard(0, split_factor=2), Shard(0)), (8, 3)),  # FSDP over TP
    ]
    failures = []
    for i, (mesh, placements, shape) in enumerate(cases):
        full = torch.randn(shape, generator=g)
        dt = distribute_tensor(full, mesh, placements)
        for writer in (0, RANKS - 1):
            for dtype, piece in ((None, None), (torch.bfloat16, 24)):
                got = hf_gather.gather_to(dt, writer, dtype, piece_bytes=piece)
                want = dt.full_tensor().to(dtype or full.dtype)
                if rank != writer:
                    if got is not None:
                        failures.append(f"case {i}: rank {rank} got a tensor for {writer}")
                elif got is None or got.dtype != want.dtype or not torch.equal(got, want):
                    failures.append(f"case {i} {placements} {shape} to {writer} {dtype} "
                                    f"piece {piece}: {got} != {want}")
    return failures


def _layout(layout: str, model, world_mesh):
    from torch.distributed.device_mesh import init_device_mesh

    from hyper_parallel.models.qwen3_5.parallelize import apply_fsdp, apply_tp

    if layout in ("fsdp4", "source"):
        apply_fsdp(model, init_device_mesh("cpu", (RANKS,)))
    elif layout == "fsdp2_tp2":
        apply_tp(model, world_mesh["tp"])
        apply_fsdp(model, world_mesh["dp"])
    elif layout == "tp2":
        apply_tp(model, world_mesh["tp"])
    return model


def _worker(out_dir: str) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    from hyper_parallel.runtime.checkpoint import hf_export, hf_gather

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = Path(out_dir)
    world_mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    record: dict = {"gather_to": _check_gather_to(rank), "opened": {}, "held_not_written": 0,
                    "full_tensor_calls": 0}

    opened: list[str] = []

    class Recording(hf_export.StreamedSafetensorsFile):
        def __init__(self, path, *args, **kwargs):
            opened.append(os.path.basename(path))
            super().__init__(path, *args, **kwargs)

    hf_export.StreamedSafetensorsFile = Recording
    gathered = hf_export._gathered

    def watched(tensor, to):
        result = gathered(tensor, to)
        if result is not None and to.rank != rank:
            record["held_not_written"] += 1
        return result

    hf_export._gathered = watched
    full_tensor = DTensor.full_tensor

    def counted(self, *args, **kwargs):
        record["full_tensor_calls"] += 1
        return full_tensor(self, *args, **kwargs)

    DTensor.full_tensor = counted
    for layout in LAYOUTS:
        model, adapter, config = _model()
        model = _layout(layout, model, world_mesh)
        opened.clear()
        if layout == "source":
            hf_gather.PIECE_BYTES = 300
        hf_export.export_hf_weights(model, adapter, config, str(out / layout),
                                    max_shard_size=SHARD_BYTES,
                                    dtypes=_rule(layout, str(out / "bf16_source")))
        hf_gather.PIECE_BYTES = 256 * 2**20
        record["opened"][layout] = list(opened)
    DTensor.full_tensor = full_tensor
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.barrier()
    dist.destroy_process_group()


# ------------------------------------------------------------------------------------ tests
def _run_job(out: Path) -> list[dict]:
    """The 4-rank job in ``out``, after a bf16 source checkpoint was written there: every
    rank's record."""
    from hyper_parallel.models.qwen3_5 import hf_io

    out.mkdir(parents=True)
    model, adapter, config = _model()
    state = {k: v.to(torch.bfloat16) for k, v in adapter.to_hf(model.state_dict(), config).items()}
    hf_io.save_hf_checkpoint(state, out / "bf16_source", config)
    spawn_ranks(os.path.abspath(__file__), [str(out)], nproc=RANKS, timeout=900)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(RANKS)]


@pytest.fixture(scope="module")
def job(pytestconfig, tmp_path_factory):
    """The 4-rank job's folder and its ranks' records: one job a session, whichever xdist
    worker runs these tests (the folder stays for the session)."""
    from tests.helpers.session_cache import session_cache

    cache = session_cache(pytestconfig, tmp_path_factory, "hf_export_ranks")
    done = cache.get("the 4-rank export job",
                     lambda out: {"folder": str(out), "records": _run_job(out)})
    return Path(done["folder"]), done["records"]


def _one_process(folder: Path, layout: str, source: Path) -> Path:
    from hyper_parallel.runtime.checkpoint import export_hf_weights

    model, adapter, config = _model()
    return Path(export_hf_weights(model, adapter, config, str(folder / layout),
                                  max_shard_size=SHARD_BYTES,
                                  dtypes=_rule(layout, str(source))))


def test_gather_to_is_full_tensor_on_the_writer_alone(job):
    _, records = job
    for rank, record in enumerate(records):
        assert record["gather_to"] == [], rank


@pytest.mark.parametrize("layout", LAYOUTS)
def test_export_over_ranks_is_the_one_process_export_bit_for_bit(job, tmp_path, layout):
    out, _ = job
    ours = out / layout
    theirs = _one_process(tmp_path, layout, out / "bf16_source")
    names = sorted(p.name for p in theirs.iterdir())
    assert sorted(p.name for p in ours.iterdir()) == names
    assert len([n for n in names if n.endswith(".safetensors")]) > RANKS
    for name in names:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), (layout, name)


@pytest.mark.parametrize("layout, dtype", [("fsdp4", "F32"), ("fsdp2_tp2", "BF16"),
                                           ("source", "BF16")])
def test_the_files_hold_the_asked_dtype(job, layout, dtype):
    from tests.helpers.hf_export_check import check_layout

    out, _ = job
    tensors = check_layout(out / layout, SHARD_BYTES)
    code = {torch.float32: "F32", torch.bfloat16: "BF16"}
    assert {code[t.dtype] for t in tensors.values()} == {dtype}
    config = json.loads((out / layout / "config.json").read_text())
    assert config["dtype"] == {"F32": "float32", "BF16": "bfloat16"}[dtype]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_file_is_written_by_its_own_rank_spread_over_all(job, layout):
    """Every file opened once, by the rank the spread gives it (file i of n: rank i % 4 here,
    n > 4), so every rank writes."""
    out, records = job
    files = sorted(p.name for p in (out / layout).glob("*.safetensors"))
    writers = {}
    for rank, record in enumerate(records):
        for name in record["opened"][layout]:
            assert name not in writers, f"{name} opened by ranks {writers[name]} and {rank}"
            writers[name] = rank
    assert sorted(writers) == files
    assert all(writers[name] == i % RANKS for i, name in enumerate(files)), writers
    assert set(writers.values()) == set(range(RANKS))


def test_no_rank_holds_a_tensor_it_does_not_write(job):
    """The tensors go to their writer alone: no rank all-gathers (``full_tensor``) and no
    rank but the writer gets a gathered tensor."""
    _, records = job
    for rank, record in enumerate(records):
        assert record["full_tensor_calls"] == 0, rank
        assert record["held_not_written"] == 0, rank


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    _worker(sys.argv[1])
    exit_now(0)
