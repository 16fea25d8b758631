"""ParallelDims: validation, auto-fill, canonical mesh order, aliases; real meshes on 2 and 4 ranks."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hyper_parallel.runtime.parallel_dims import ParallelDims
from hyper_parallel.trainer.config import AcceleratorConfig
from tests.helpers.torchrun import spawn_ranks

WORKER = Path(__file__).parent / "workers" / "mesh_worker.py"


def test_auto_fill_dp_shard():
    assert ParallelDims(dp_shard=-1, tp=2, cp=2, world_size=16).dp_shard == 4
    assert ParallelDims(dp_shard=-1, world_size=8).dp_shard == 8


def test_product_rule_message_has_world_size_and_fix():
    with pytest.raises(ValueError, match=r"world_size\(8\).*Set dp_shard=-1 to auto-infer"):
        ParallelDims(dp_shard=2, tp=2, world_size=8)


def test_auto_fill_not_divisible():
    with pytest.raises(ValueError, match=r"world_size\(6\) is not divisible by .* = 4"):
        ParallelDims(dp_shard=-1, tp=4, world_size=6)


@pytest.mark.parametrize("field", ["dp_replicate", "cp", "tp", "pp", "ep", "etp"])
def test_degrees_must_be_positive(field):
    with pytest.raises(ValueError, match=f"{field}=0 is invalid"):
        ParallelDims(**{field: 0}, world_size=1)


@pytest.mark.parametrize("value", [0, -2])
def test_dp_shard_zero_or_below_minus_one(value):
    with pytest.raises(ValueError, match=f"dp_shard={value} is invalid"):
        ParallelDims(dp_shard=value, world_size=1)


def test_etp_rule_and_pp_and_ulysses():
    with pytest.raises(ValueError, match="etp=3"):
        ParallelDims(ep=2, tp=2, etp=3, world_size=4)
    assert ParallelDims(ep=2, tp=2, etp=2, world_size=4).etp == 2
    pp = ParallelDims(pp=2, world_size=2)
    # A pipeline stage is trained by one data-parallel rank: FSDP's policies wrap it over a
    # dp_shard axis of size 1.
    assert pp.mesh_dims() == (("dp_shard", "pp"), (1, 2))
    with pytest.raises(ValueError, match="ulysses_degree=3"):
        ParallelDims(cp=4, ulysses_degree=3, world_size=4)


def test_from_config_legacy_dp_fallback():
    acc = AcceleratorConfig(dp=4)
    assert ParallelDims.from_config(acc, world_size=4).dp_shard == 4
    acc = AcceleratorConfig(dp=4, dp_shard=2, tp=2)
    assert ParallelDims.from_config(acc, world_size=4).dp_shard == 2
    assert ParallelDims.from_config(AcceleratorConfig(), world_size=1).dp_shard == 1
    duck = SimpleNamespace(dp_replicate=1, dp_shard=1, cp=1, tp=2, pp=1, ep=2)  # no etp attribute
    assert ParallelDims.from_config(duck, world_size=4).etp == 2


def test_sizes_and_summary():
    d = ParallelDims(dp_replicate=2, dp_shard=2, tp=2, world_size=8)
    assert (d.dp_size, d.non_dp_size, d.seq_divisor) == (4, 2, 2)
    assert d.fsdp_enabled and d.tp_enabled and not d.cp_enabled
    assert d.summary() == "dp_replicate=2 dp_shard=2 cp=1 tp=2 pp=1 ep=1 etp=1 | dp=4 world=8"


def test_canonical_order_and_aliases():
    d = ParallelDims(dp_replicate=2, dp_shard=2, ep=2, cp=2, tp=2, world_size=32)
    assert d.mesh_dims() == (("dp_replicate", "dp_shard", "ep", "cp", "tp"), (2, 2, 2, 2, 2))
    # The ep ranks split their batch's rows (ParallelDims.batch_split) and the cp ranks its
    # positions (seq_split), so tokens are summed over both, FSDP shards the dense parameters
    # over dp_shard x ep (MoE) or dp_shard x cp, and averages gradients over all of them.
    assert d.alias_dims() == {
        "fsdp": ("dp_shard",),
        "dp": ("dp_replicate", "dp_shard"),
        "loss": ("dp_replicate", "dp_shard", "ep", "cp"),
        "dp_shard_ep": ("dp_shard", "ep"),
        "dp_shard_cp": ("dp_shard", "cp"),
    }
    assert (d.dp_size, d.batch_split, d.seq_split, d.grad_average_size) == (4, 2, 2, 16)
    assert ParallelDims(dp_shard=2, cp=2, world_size=4).alias_dims()["loss"] == ("dp_shard", "cp")
    assert ParallelDims(ep=2, world_size=2).alias_dims() == {"loss": ("ep",)}
    assert ParallelDims(cp=2, world_size=2).alias_dims() == {"loss": ("cp",)}
    assert ParallelDims(tp=2, world_size=2).alias_dims() == {}  # pure TP: no fsdp/dp/loss
    assert ParallelDims(world_size=1).mesh_dims() == (("dp_shard",), (1,))


def test_validate_against_model():
    model = SimpleNamespace(config=SimpleNamespace(num_attention_heads=12, num_key_value_heads=4))
    with pytest.raises(ValueError, match="num_attention_heads=12 is not divisible by tp=8"):
        ParallelDims(tp=8, world_size=8).validate_against_model(model, seq_len=64)
    with pytest.raises(ValueError, match=r"30 is not divisible by cp\*tp=4"):
        ParallelDims(tp=2, cp=2, world_size=4).validate_against_model(model, seq_len=30)
    ParallelDims(tp=2, world_size=2).validate_against_model(model, seq_len=64)
    ParallelDims(tp=2, world_size=2).validate_against_model(SimpleNamespace(), seq_len=3)


#: The two-rank meshes the tests below read, built in one job.
TWO_RANK_MESHES = {"fsdp2": {"dp_shard": -1}, "tp2": {"tp": 2}, "hsdp": {"dp_replicate": 2}}


def _meshes(folder, nproc: int, meshes: list[dict]) -> list[dict]:
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "mesh.json"
    spawn_ranks(WORKER, [json.dumps(meshes), str(out)], nproc=nproc, timeout=120)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def two_rank_meshes(tmp_path_factory) -> dict:
    infos = _meshes(tmp_path_factory.mktemp("meshes"), 2, list(TWO_RANK_MESHES.values()))
    return dict(zip(TWO_RANK_MESHES, infos))


@pytest.mark.slow
def test_mesh_fsdp2_torchrun(two_rank_meshes):
    info = two_rank_meshes["fsdp2"]
    assert info["dim_names"] == ["dp_shard"] and info["shape"] == [2] and info["dp_shard"] == 2
    assert set(info["aliases"]) == {"fsdp", "dp", "loss"}
    assert info["aliases"]["dp"] == {"size": 2, "group_of_rank": [0, 1]}


@pytest.mark.slow
def test_mesh_tp2_torchrun(two_rank_meshes):
    info = two_rank_meshes["tp2"]
    assert info["dim_names"] == ["tp"] and info["aliases"] == {}


@pytest.mark.slow
def test_mesh_hsdp_torchrun(two_rank_meshes):
    # dp_replicate=2 on 2 ranks: the replicate axis alone.
    info = two_rank_meshes["hsdp"]
    assert info["dim_names"] == ["dp_replicate"]
    assert set(info["aliases"]) == {"dp", "loss"}


@pytest.mark.slow
def test_mesh_hsdp_2x2_torchrun(tmp_path):
    (info,) = _meshes(tmp_path, 4, [{"dp_replicate": 2, "dp_shard": 2}])
    assert info["dim_names"] == ["dp_replicate", "dp_shard"] and info["shape"] == [2, 2]
    assert info["aliases"]["fsdp"] == {"size": 2, "group_of_rank": [0, 1]}
    assert info["aliases"]["dp"] == {"size": 4, "group_of_rank": [0, 1, 2, 3]}


@pytest.mark.parametrize("other, field", [("expert_parallel_degree", "expert")])
def test_context_parallelism_with_expert_parallelism_is_refused(other, field):
    from hyper_parallel.config.configs import ParallelismConfig
    from hyper_parallel.utils.errors import ConfigError

    parallelism = ParallelismConfig(context_parallel_degree=2, **{other: 2})
    with pytest.raises(ConfigError, match=f"not been tested with {field} parallelism") as err:
        ParallelDims.from_parallelism(parallelism, world_size=4)
    assert err.value.path == "parallelism.context_parallel_degree"


def test_context_parallelism_with_pipeline_parallelism_is_a_layout():
    """Each pipeline stage runs its context-parallel shard of the rows (the CP x PP runs of
    tests/torch/st/qwen3_5/test_context_parallel.py)."""
    from hyper_parallel.config.configs import ParallelismConfig

    parallelism = ParallelismConfig(context_parallel_degree=2, pipeline_parallel_degree=2)
    dims = ParallelDims.from_parallelism(parallelism, world_size=4)
    assert (dims.cp, dims.pp, dims.seq_split) == (2, 2, 2)
