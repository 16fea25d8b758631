"""``preflight_many`` measures a pipeline's rank roles side by side, one process each, and a role
extrapolated over its depth in its three parts (two periods deep, one, its whole build on
``meta``), the dearest first, and puts the preflight together from them: the same report as
one process measuring every role, each role measured once, in one process, and kept on disk as
one process keeps what it measures."""

from __future__ import annotations

import dataclasses

import pytest

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.preflight import many, measurement_cache, run
from hyper_parallel.preflight.gpus import GPUS
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

pytestmark = pytest.mark.slow  # a spawned worker: seconds of imports

PIPELINE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
            "--parallelism.pipeline_parallel_degree=2", "--parallelism.num_pp_microbatches=2",
            "--training.local_batch_size=2", "--training.global_batch_size=2",
            # A length of this test's own: no worker kept from another test has measured it.
            "--training.seq_len=192"]


#: The debug model 6 layers deep, a Gated DeltaNet layer and a full-attention one repeated 3
#: times: stepped 2 and 4 deep, extrapolated to 6.
DEEP = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
        "--model.num_hidden_layers=6", "--model.config_overrides={full_attention_interval: 2}", "--parallelism.data_parallel_shard_degree=2",
        "--training.local_batch_size=2", "--training.global_batch_size=4",
        "--training.seq_len=72"]  # a length of this test's own, as above


def measured_ranks(config) -> list[int]:
    """The representative ranks of ``config`` this process has measured (run in the pool's
    worker too)."""
    from hyper_parallel.preflight.simulate import simulation_key

    key = simulation_key(config)
    return sorted(entry[1] for entry in run._MEASURED if entry[0] == key)


def _figures(report) -> list:
    return [dataclasses.replace(role, seconds=0.0) for role in report.roles]


def test_a_pipelines_roles_are_measured_side_by_side_and_put_together(monkeypatch):
    config = ConfigManager(root_type=HyperTrainer.Config).parse_args(PIPELINE)
    gpu = GPUS["h100-80gb"]
    if many._POOL is not None and many._POOL[0] > 1:
        many._shutdown()  # one worker, so that the question below reaches the one that ran
    run._MEASURED.clear()
    run._WORK.clear()
    (report,) = many.preflight_many([config], gpu, workers=2, work=True, suggest=False)
    elsewhere = many._pool(1).submit(measured_ranks, config).result()
    here = measured_ranks(config)
    # One role in the worker, the other here, and both kept here.
    assert len(elsewhere) == 1 and here == [0, 1], (elsewhere, here)
    run._MEASURED.clear()
    run._WORK.clear()
    # Simulated again here, not read from what the two processes kept on disk.
    monkeypatch.setenv(measurement_cache.CACHE_ENV, "off")
    alone = run.preflight(config, gpu, work=True)
    assert len(report.roles) == 2 and report.fits
    assert _figures(report) == _figures(alone)
    assert all(role.work is not None for role in report.roles)


def test_a_role_extrapolated_over_its_depth_is_measured_in_its_parts_side_by_side(monkeypatch):
    config = ConfigManager(root_type=HyperTrainer.Config).parse_args(DEEP)
    gpu = GPUS["h100-80gb"]
    assert run.depth_parts(config) == (4, 2, 0)
    ran: list[tuple] = []
    run_tasks = many._run_tasks

    def spied(tasks, workers, order=None):
        ran.extend((tasks[i][0].__name__, tasks[i][5]) for i in order)
        return run_tasks(tasks, workers, order)

    monkeypatch.setattr(many, "_run_tasks", spied)
    run._MEASURED.clear()
    run._WORK.clear()
    (report,) = many.preflight_many([config], gpu, workers=2, work=True, suggest=False)
    # The three parts, the dearest first (the worker takes it; this process the others).
    assert ran == [("_part", 4), ("_part", 2), ("_part", 0)], ran
    assert [role.memory.depth for role in report.roles] == ["2 + 4 layers -> 6"]
    # Kept on disk as a role measured in one process is: another process reads it.
    run._MEASURED.clear()
    run._WORK.clear()
    assert run.already_measured(config, None, run.DEFAULT_IMBALANCE, work=True)
    run._MEASURED.clear()
    run._WORK.clear()
    monkeypatch.setenv(measurement_cache.CACHE_ENV, "off")
    alone = run.preflight(config, gpu, work=True)
    assert _figures(report) == _figures(alone)
    assert report.roles[0].work is not None
