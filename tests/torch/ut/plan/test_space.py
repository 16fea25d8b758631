"""The planner's space: every layout of a world, the engine's own refusals as the reasons of the
families it drops, TP and EP inside a node on the engine's mesh, a memory floor that never
exceeds what preflight measures, and a candidate that survives being written into a recipe's
configuration and read back.

Pure functions but for the memory floor's check, which preflights three layouts of the tiny
model on 2 ranks (and is marked slow)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyper_parallel.plan import space
from hyper_parallel.plan.space import Candidate, Layout

DEBUG = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]
TINY = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2",
        "--model.config_overrides={\"flavor\": \"tiny\"}"]
MOE = ["--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel"]


def _config(argv):
    from hyper_parallel.train import parse_run

    return parse_run(argv).config


@pytest.fixture(scope="module")
def debug():
    config = _config(DEBUG)
    return config, space.model_facts(config)


def _prime_powers(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        a = 0
        while n % p == 0:
            n //= p
            a += 1
        if a:
            out.append(a)
        p += 1
    return out


@given(world=st.integers(1, 96), parts=st.integers(1, 6))
@settings(max_examples=60, deadline=None)
def test_factorizations_are_every_ordered_split_of_the_world_once(world, parts):
    found = list(space.factorizations(world, parts))
    assert all(math.prod(f) == world and len(f) == parts for f in found)
    assert len(set(found)) == len(found)
    # The number of ordered factorizations: a product over the prime powers p^a of C(a+k-1, k-1).
    assert len(found) == math.prod(math.comb(a + parts - 1, parts - 1)
                                   for a in _prime_powers(world))


@st.composite
def layouts(draw, max_world=16):
    degrees = {}
    world = 1
    for name in ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep"):
        d = draw(st.sampled_from([1, 2, 4]))
        if world * d > max_world:
            d = 1
        degrees[name] = d
        world *= d
    return Layout(**degrees), world


@given(layouts(), st.data())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_group_ranks_are_the_groups_of_the_engines_mesh(drawn, data):
    """A group's ranks, read off the mesh's order, are the ranks of the 1-D mesh the engine
    builds for that axis (torch's DeviceMesh, in preflight's fake process group)."""
    from hyper_parallel.preflight.fake_world import fake_process_group
    from hyper_parallel.runtime.parallel_dims import ParallelDims

    layout, world = drawn
    rank = data.draw(st.integers(0, world - 1))
    dims = ParallelDims(dp_replicate=layout.dp_replicate, dp_shard=layout.dp_shard,
                        cp=layout.cp, tp=layout.tp, pp=layout.pp, ep=layout.ep, world_size=world)
    with fake_process_group(rank, world):
        dims.build_mesh("cpu")
        for axis in ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep"):
            groups = space.group_ranks(layout, world, axis)
            if not dims.has_mesh(axis):
                assert groups == []
                continue
            engine = tuple(dims.get_mesh(axis).mesh.tolist())
            mine = [g for g in groups if rank in g]
            assert mine == [engine], axis
            assert sorted(r for g in groups for r in g) == list(range(world))


def test_tensor_and_expert_parallelism_stay_inside_a_node():
    # pp is the mesh's innermost axis: tp 2 under pp 8 puts a TP pair 8 ranks apart.
    reason = space.outside_node(Layout(dp_shard=8, tp=2, pp=8), 128, 8)
    assert reason is not None and "tensor-parallel" in reason and "2 nodes" in reason
    assert space.outside_node(Layout(dp_shard=64, tp=2), 128, 8) is None
    assert space.outside_node(Layout(dp_shard=16, tp=2, pp=4), 128, 8) is None
    # The 397B recipe's own expert-parallel degree spans two nodes of 8.
    reason = space.outside_node(Layout(dp_shard=8, ep=16), 128, 8)
    assert reason is not None and "expert-parallel" in reason
    assert space.outside_node(Layout(dp_shard=16, ep=8), 128, 8) is None
    # One node of 16: the same layout stays inside.
    assert space.outside_node(Layout(dp_shard=8, ep=16), 128, 16) is None


@given(layouts(max_world=32), st.sampled_from([1, 2, 4, 8]))
@settings(max_examples=40, deadline=None)
def test_outside_a_node_exactly_when_a_tp_or_ep_group_spans_two_nodes(drawn, gpus_per_node):
    layout, world = drawn
    spans = any(len({r // gpus_per_node for r in g}) > 1
                for axis in ("tp", "ep") for g in space.group_ranks(layout, world, axis))
    assert (space.outside_node(layout, world, gpus_per_node) is not None) == spans


def test_the_engines_refusals_are_the_dropped_families_reasons(debug):
    """The debug model has 2 key/value heads: TP 4 is dropped as a family, in the engine's own
    words; expert parallelism is the dense model's refusal; no survivor has either."""
    from hyper_parallel.preflight.gpus import GPUS

    config, facts = debug
    found = space.build_space(config, 4, 4, GPUS["h100-80gb"], facts)
    reasons = {d.reason.split(":")[0].split(" (")[0]: d for d in found.dropped}
    tp4 = reasons["tp 4"]
    assert tp4.layout == {"tp": 4}
    assert "num_key_value_heads=2 is not divisible by tp=4" in tp4.reason
    assert any(d.layout.get("ep") and "no experts" in d.reason for d in found.dropped)
    assert found.candidates
    assert all(c.layout.tp < 4 and c.layout.ep == 1 for c in found.candidates)
    # Every survivor passes the engine's checks, and every degree splits the world.
    for c in found.candidates[:: max(1, len(found.candidates) // 20)]:
        space.engine_check(space.apply(config, c), 4, facts)


def test_experts_over_ep_and_tp_cap_of_the_moe_model():
    from hyper_parallel.preflight.gpus import GPUS

    config = _config(MOE)
    facts = space.model_facts(config)
    found = space.build_space(config, 8, 8, GPUS["h100-80gb"], facts)
    assert all(facts.num_experts % c.layout.ep == 0 for c in found.candidates)
    assert all(c.layout.cp == 1 for c in found.candidates)  # the MoE family refuses CP
    assert any("context parallelism" in d.reason and "cp" in d.layout for d in found.dropped)


@given(st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
def test_a_candidate_written_into_the_recipe_reads_back_as_itself(debug, data):
    """``apply`` then ``candidate_of`` is the identity on the space's candidates: the recipe
    the plan writes is the layout it planned; the global batch is the recipe's."""
    config, facts = debug
    world = data.draw(st.sampled_from([2, 4]))
    found = _space_of(config, facts, world)
    candidate = data.draw(st.sampled_from(found.candidates))
    applied = space.apply(config, candidate)
    assert space.candidate_of(applied, world) == candidate
    assert applied.training.global_batch_size == config.training.global_batch_size
    assert applied.training.seq_len == config.training.seq_len
    assert config.parallelism.tensor_parallel_degree == 1  # the base is untouched


@given(st.data())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
def test_the_checked_view_is_the_applied_candidate_and_leaves_the_recipe_as_it_was(debug, data):
    """The space checks each candidate on a view that copies only the sections a candidate
    sets: it equals ``apply``'s deep copy field for field, and building a space (thousands
    of checks on views) leaves the recipe exactly as it was: the engine's checks only read."""
    config, facts = debug
    before = space.copy_config(config)
    world = data.draw(st.sampled_from([2, 4]))
    found = _space_of(config, facts, world)
    candidate = data.draw(st.sampled_from(found.candidates))
    view = space.checked_view(config, candidate)
    assert view == space.apply(config, candidate)
    space.engine_check(view, world, facts)
    assert config == before
    for name in space.CANDIDATE_SECTIONS:  # the view's own copies, not the recipe's
        assert getattr(view, name) is not getattr(config, name)


_SPACES: dict = {}


def _space_of(config, facts, world):
    from hyper_parallel.preflight.gpus import GPUS

    if world not in _SPACES:
        _SPACES[world] = space.build_space(config, world, world, GPUS["h100-80gb"], facts)
    return _SPACES[world]


def test_a_layout_whose_floor_exceeds_the_gpu_is_dropped_with_the_floor(debug):
    from hyper_parallel.preflight.gpus import gpu_of_size

    config, facts = debug
    small = gpu_of_size(1.2)  # below the allowances of a rank with several process groups
    found = space.build_space(config, 4, 4, small, facts)
    floors = [d for d in found.dropped if "needs at least" in d.reason]
    assert floors
    assert all(f <= small.memory_bytes for f in found.floors.values())


@pytest.mark.slow
@pytest.mark.parametrize("layout, lbs, micro", [
    (Layout(dp_shard=2), 1, 1),
    (Layout(tp=2), 2, 1),
    (Layout(pp=2, pp_schedule="1F1B"), 2, 2),
    (Layout(dp_replicate=2), 1, 1),
])
def test_the_memory_floor_never_exceeds_what_preflight_measures(layout, lbs, micro):
    """The floor is a lower bound: at most the fullest role's parameters, gradients and
    optimizer state as preflight builds them, and at most its total."""
    from hyper_parallel.preflight.check import preflight_config
    from hyper_parallel.preflight.gpus import GPUS

    base = _config(TINY)
    facts = space.model_facts(base)
    config = space.apply(base, Candidate(layout, lbs, micro, "none"))
    floor, _ = space.memory_floor(layout, config, facts, 2)
    held, _ = space.held_floor(layout, config, facts, 2)
    report = preflight_config(config, GPUS["h100-80gb"], world=2, suggest=False)
    assert not report.problems
    assert 0 < held < floor <= max(r.total_bytes for r in report.roles)
    assert held <= max(r.memory.params_bytes + r.memory.grads_bytes + r.memory.optimizer_bytes
                       for r in report.roles)


@given(layouts(max_world=64))
@settings(max_examples=40, deadline=None)
def test_replicas_without_a_shard_axis_are_searched_once_as_fsdp(drawn):
    """A layout whose replicas have no shard axis beside them (no dp_shard, cp or ep) is the
    FSDP layout of that degree spelled otherwise: the same groups on the engine's mesh, and
    the space keeps only the FSDP spelling."""
    layout, world = drawn
    twin = space.same_run(layout)
    plain = layout.dp_replicate > 1 and layout.dp_shard == layout.cp == layout.ep == 1
    assert (twin is not None) == plain
    if twin is not None:
        assert twin.dp_replicate == 1 and twin.dp_shard == layout.dp_replicate
        assert space.same_run(twin) is None
        assert space.group_ranks(layout, world, "dp_replicate") == space.group_ranks(
            twin, world, "dp_shard")
        for axis in ("tp", "pp"):
            assert space.group_ranks(layout, world, axis) == space.group_ranks(twin, world, axis)


def test_the_space_holds_no_replicate_only_layout(debug):
    config, facts = debug
    from hyper_parallel.preflight.gpus import GPUS

    found = space.build_space(config, 4, 4, GPUS["h100-80gb"], facts)
    assert Layout(dp_shard=4) in found.layouts
    assert not any(space.same_run(lay) for lay in found.layouts)
    assert any("the same run as" in d.reason and d.layout.get("dp_replicate")
               for d in found.dropped)


@pytest.mark.slow
def test_replicate_only_preflights_as_its_fsdp_twin():
    """The premise of dropping replicate-only layouts, checked on the engine: replicate 2 and
    fsdp 2 build the same shards and record the same work, collective by collective (only
    the mesh axis is named otherwise)."""
    import dataclasses

    from hyper_parallel.preflight.check import preflight_config
    from hyper_parallel.preflight.gpus import GPUS

    base = _config(TINY)
    replicas = Layout(dp_replicate=2)
    reports = [preflight_config(space.apply(base, Candidate(layout, 1, 1, "none")),
                                GPUS["h100-80gb"], world=2, suggest=False, work=True)
               for layout in (replicas, space.same_run(replicas))]
    (one,), (two,) = (r.roles for r in reports)
    assert one.total_bytes == two.total_bytes
    assert one.memory.detail == two.memory.detail
    renamed = [dataclasses.replace(c, axis="dp_shard" if c.axis == "dp_replicate" else c.axis)
               for c in one.work.collectives]
    assert renamed == list(two.work.collectives)
    assert (one.work.flops, one.work.memory_bytes, one.work.operators) == (
        two.work.flops, two.work.memory_bytes, two.work.operators)
