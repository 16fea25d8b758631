"""Every parallelism builds at 64, 128 and 512 ranks: rank 0 of each layout is built by the
engine's own code over a fake process group (the real ``ParallelDims``, mesh, parallelize,
pipelining and expert code, the model on ``meta``), so no code assumes a small world."""

from __future__ import annotations

import dataclasses

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


@pytest.mark.parametrize("degrees, in_fake_mode", [
    ({"data_parallel_shard_degree": 2}, False),
    ({"data_parallel_shard_degree": 2, "tensor_parallel_degree": 2}, False),
    ({"pipeline_parallel_degree": 2, "num_pp_microbatches": 2}, True),
])
def test_the_parallelize_code_runs_on_meta_as_the_engine_runs_it(monkeypatch, degrees,
                                                                 in_fake_mode):
    """A role's parallelize code (FSDP's splitting, tensor parallelism's) runs on the ``meta``
    model outside the fake mode, as the engine runs it before it materializes, and the model
    is then materialized as fake tensors; a pipeline's stages are cut, parallelized and
    materialized one by one, in the fake mode (``RoleBuild.parallelize``)."""
    from torch._guards import active_fake_mode
    from torch._subclasses.fake_tensor import FakeTensor

    argv = [*DENSE, *(f"{P}{k}={v}" for k, v in degrees.items())]
    config = simulation_config(ConfigManager(root_type=HyperTrainer.Config).parse_args(argv))
    world = 1
    for key, value in degrees.items():
        world *= value if key != "num_pp_microbatches" else 1
    seen = []
    with fake_process_group(0, world):
        build = RoleBuild(config)
        parallelize = build.spec.parallelize_fn

        def spy(model, *args, **kwargs):
            seen.append(active_fake_mode() is not None)
            return parallelize(model, *args, **kwargs)

        monkeypatch.setattr(build, "spec", dataclasses.replace(build.spec, parallelize_fn=spy))
        with fake_world():
            build.parallelize()
        local = [getattr(p, "_local_tensor", p) for part in build.model_parts
                 for p in part.parameters()]
    assert seen == [in_fake_mode]
    assert local and all(isinstance(t, FakeTensor) for t in local)
