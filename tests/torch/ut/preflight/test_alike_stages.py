"""A pipeline rank's alike stages step once (``simulate.stage_peak``): the role's memory and its
step's work are those of stepping every stage, to the byte and to the operator.

Each case is the tiny model 8 layers deep (3 Gated DeltaNet layers and one attention layer,
twice) in 8 stages over 2 pipeline ranks. The engine's balanced split counts the head as a
layer's worth: stage 0 holds layer 0, stage 1 layers 1-2, stages 2-6 one layer each (3 and 7
attention) and stage 7 the norm and the head. So rank 0 (stages 0, 2, 4, 6) has two alike
attention stages, 2 and 6, and rank 1 (1, 3, 5, 7) two alike Gated DeltaNet stages, 3 and 5. Every role is measured twice in this process: as preflight
steps it, and with every stage a shape of its own (``stage_shape`` patched to the stage's
index: the stepping before alike stages were grouped). A control checks the grouping is not
vacuous (fewer stages stepped than held) and that stages which differ -- another kind of
layer, activation checkpointing on other layers -- are stepped apart.

The tensor-parallel case measures rank 1 after rank 0 in one process, as every preflight of a
pipeline does: DTensor's caches handed the second build the first one's mesh, whose process
group was gone ("Could not resolve the process group registered under the name 5"), until
``fake_process_group`` emptied them with the group.
"""

from __future__ import annotations

import pytest

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.preflight import simulate
from hyper_parallel.preflight.run import measure_role, role_ranks
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

PIPELINE = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
            "--model.config_overrides={flavor: tiny, num_hidden_layers: 8}",
            "--parallelism.pipeline_parallel_degree=2",
            "--parallelism.pipeline_parallel_stages_per_rank=4",
            "--parallelism.num_pp_microbatches=4", "--training.local_batch_size=4",
            "--training.global_batch_size=4", "--training.seq_len=64")
CASES = {
    "TP 2 x interleaved 1F1B, selective checkpointing": (
        ("--parallelism.pipeline_parallel_schedule=Interleaved1F1B",
         "--parallelism.tensor_parallel_degree=2", "--activation_checkpoint.mode=selective"), 4),
    "FSDP 2 x looped BFS, bf16, full checkpointing of stages' first layers": (
        ("--parallelism.pipeline_parallel_schedule=LoopedBFS",
         "--parallelism.data_parallel_shard_degree=2", "--training.global_batch_size=8",
         "--training.mixed_precision_param=bfloat16", "--activation_checkpoint.mode=full"), 4),
}


#: Checkpointed layers per stage under full checkpointing: stage 5 none, so it is not alike
#: stage 3, which it otherwise is.
CHECKPOINTED = [1, 1, 1, 1, 1, 0, 1, 1]


def _config(extra: tuple[str, ...]):
    config = ConfigManager(root_type=HyperTrainer.Config).parse_args([*PIPELINE, *extra])
    if config.activation_checkpoint.mode == "full":
        config.activation_checkpoint.num_layers = CHECKPOINTED
    return simulate.simulation_config(config)


def _measure(config, world: int) -> list:
    out = []
    for ranks in role_ranks(config, world):
        work: list = []
        memory, _ = measure_role(config, ranks[0], world, 1.0, work=work)
        out.append((memory, work[0]))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_alike_stages_step_once_with_every_figure_of_stepping_each(name, monkeypatch):
    extra, world = CASES[name]
    config = _config(extra)
    shapes: list[tuple] = []  # (rank's role, its stage's shape), each stage of each role
    shape_of = simulate.stage_shape

    def spying(part, stage_index, num_stages):
        shapes.append((stage_index % 2, shape_of(part, stage_index, num_stages)))
        return shapes[-1][1]

    monkeypatch.setattr(simulate, "stage_shape", spying)
    alike = _measure(config, world)
    monkeypatch.setattr(simulate, "stage_shape", lambda part, stage_index, _: stage_index)
    every = _measure(config, world)
    for rank, ((memory, work), (want_memory, want_work)) in enumerate(zip(alike, every)):
        assert memory == want_memory, (rank, memory, want_memory)
        assert work == want_work, (rank, work, want_work)
    # Not vacuous: both roles' 8 stages were shaped, and fewer were stepped.
    assert len(shapes) == 8 and len(set(shapes)) < 8, len(set(shapes))
    assert alike[0][0].activations_bytes > 0


def test_stages_that_differ_are_stepped_apart():
    """The shapes of the checkpointing case: only 2 and 6 are alike (3 and 5 hold the same
    layer kind, but 5 is not checkpointed; the first and the last stage are never alike)."""
    from hyper_parallel.preflight.fake_world import fake_process_group, fake_world

    extra, world = CASES["FSDP 2 x looped BFS, bf16, full checkpointing of stages' first layers"]
    config = _config(extra)
    groups = {}
    for rank in (0, 1):
        with fake_process_group(rank, world):
            build = simulate.RoleBuild(config)
            with fake_world():
                build.parallelize()
                pipeline = build.pipeline
                for part, index in zip(pipeline.parts, pipeline.stage_indices):
                    shape = simulate.stage_shape(part, index, pipeline.num_stages)
                    groups.setdefault((rank, shape), []).append(index)
            del build
    assert sorted(groups.values()) == [[0], [1], [2, 6], [3], [4], [5], [7]]
