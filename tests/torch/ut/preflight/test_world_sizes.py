"""Every parallelism builds at 64, 128 and 512 ranks: rank 0 of each layout is built by the
engine's own code over a fake process group (the real ``ParallelDims``, mesh, parallelize,
pipelining and expert code, the model on ``meta``), so no code assumes a small world."""

from __future__ import annotations

import pytest

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.preflight.fake_world import fake_process_group, fake_world
from hyper_parallel.preflight.simulate import RoleBuild, parameter_bytes, simulation_config
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

DENSE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]
MOE = ["--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel"]
P = "--parallelism."
#: name -> (recipe, degrees besides FSDP's, how many ranks share one copy of a dense weight).
LAYOUTS = {
    "FSDP": (DENSE, {}),
    "HSDP 8 replicas": (DENSE, {"data_parallel_replicate_degree": 8}),
    "TP 2 x FSDP": (DENSE, {"tensor_parallel_degree": 2}),
    "CP 2 x FSDP": (DENSE, {"context_parallel_degree": 2}),
    "PP 4 x FSDP": (DENSE, {"pipeline_parallel_degree": 4, "num_pp_microbatches": 4}),
    "EP 8 x FSDP": (MOE, {"expert_parallel_degree": 8}),
}


@pytest.mark.parametrize("world", [64, 128, 512])
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_parallelism_builds_at_scale(name, world):
    recipe, degrees = LAYOUTS[name]
    others = 1
    for key, value in degrees.items():
        if key != "num_pp_microbatches":
            others *= value
    shard = world // others
    dp = shard * degrees.get("data_parallel_replicate_degree", 1)
    rows = 8  # a multiple of the expert-parallel degree (EP ranks split a micro-batch's rows)
    argv = [*recipe, *(f"{P}{k}={v}" for k, v in degrees.items()),
            f"{P}data_parallel_shard_degree={shard}",
            f"--training.local_batch_size={rows}",
            f"--training.global_batch_size={rows * dp}"]
    config = simulation_config(ConfigManager(root_type=HyperTrainer.Config).parse_args(argv))
    with fake_process_group(0, world):
        build = RoleBuild(config)
        whole = sum(p.numel() * p.element_size() for p in build.model.parameters())
        if build.parallel_dims.pp_enabled:
            with fake_world():
                build.parallelize()
        else:
            build.parallelize_on_meta()
        params, _ = parameter_bytes(build)
        assert build.parallel_dims.world_size == world
    # Every weight is split over the FSDP ranks (and TP / PP / EP): rank 0 holds about its
    # share -- FSDP gives it the ceiling of each tensor's rows, at most a row more each.
    assert 0 < params <= whole / shard + (1 << 20)
