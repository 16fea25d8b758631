"""The time model prices a role's work as its docstring says (hyper_parallel/plan/timing.py).

Pure functions over made-up work and hardware: properties drawn by hypothesis (more bandwidth
or compute is never slower, more micro-batches never a larger bubble fraction, a group inside
a node is priced on NVLink and one across nodes on the network), the bubble of uniform stages
as the formulas (p-1)/(m+p-1) and (p-1)/(v m+p-1), and the overlap the engine has (FSDP's
all-gathers hidden under compute but the first, tensor-parallel collectives exposed).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.plan.hardware import Hardware, datasheet
from hyper_parallel.plan.timing import (
    collective_seconds,
    mfu,
    pipeline_bubble_fraction,
    predict,
    role_seconds,
    tokens_per_second_per_gpu,
)
from hyper_parallel.plan.work import Collective, RoleWork

H100 = datasheet("h100-80gb")
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send_recv", "broadcast")
AXES = ("dp_shard", "tp", "ep", "cp", "dp_replicate", "")


@st.composite
def works(draw, ranks: int = 16) -> RoleWork:
    n = draw(st.integers(2, ranks))
    start = draw(st.integers(0, ranks - n))
    collectives = [
        Collective(draw(st.sampled_from(KINDS)), draw(st.integers(1, 1 << 30)),
                   tuple(range(start, start + n)), draw(st.integers(1, 64)),
                   draw(st.sampled_from(("forward", "backward", "optimizer", ""))),
                   draw(st.sampled_from(AXES)))
        for _ in range(draw(st.integers(0, 6)))
    ]
    matmul = draw(st.floats(0, 1e16))
    forward = draw(st.floats(0.1, 0.9))
    return RoleWork(flops={"matmul": matmul, "attention": draw(st.floats(0, 1e14))},
                    memory_bytes=draw(st.floats(0, 1e12)), collectives=collectives,
                    phase_flops={"forward": forward * matmul, "backward": (1 - forward) * matmul},
                    micro_batches=draw(st.integers(1, 16)))


RATES = ("bf16_flops", "hbm_bytes_per_s", "intra_node_bytes_per_s", "inter_node_bytes_per_s")


@settings(max_examples=200, deadline=None)
@given(works(), st.sampled_from(RATES), st.floats(1.0, 100.0), st.sampled_from((2, 4, 8)))
def test_more_of_any_rate_is_never_slower(work, rate, factor, gpus_per_node):
    faster = dataclasses.replace(H100, **{rate: getattr(H100, rate) * factor})
    slow = sum(role_seconds(work, gpus_per_node, H100)[:2])
    fast = sum(role_seconds(work, gpus_per_node, faster)[:2])
    assert fast <= slow * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(KINDS), st.integers(1, 1 << 32), st.integers(2, 8), st.integers(0, 56))
def test_a_group_inside_a_node_is_priced_on_nvlink_across_nodes_on_the_network(
        kind, nbytes, n, start):
    node = start - start % 8
    inside = Collective(kind, nbytes, tuple(range(node, node + n)))
    first = node + 8 - max(1, n // 2)  # ranks on both sides of the node's end
    across = Collective(kind, nbytes, tuple(range(first, first + n)))
    # Only the link's own figures move a collective's price.
    no_network = dataclasses.replace(H100, inter_node_bytes_per_s=1.0, inter_node_latency_s=9.0)
    no_nvlink = dataclasses.replace(H100, intra_node_bytes_per_s=1.0, intra_node_latency_s=9.0)
    assert collective_seconds(inside, 8, no_network) == collective_seconds(inside, 8, H100)
    assert collective_seconds(inside, 8, no_nvlink) > collective_seconds(inside, 8, H100)
    assert collective_seconds(across, 8, no_nvlink) == collective_seconds(across, 8, H100)
    assert collective_seconds(across, 8, no_network) > collective_seconds(across, 8, H100)


@pytest.mark.parametrize(("kind", "factor"), [("all_reduce", 2 * 7 / 8), ("all_gather", 7 / 8),
                                              ("reduce_scatter", 7 / 8), ("all_to_all", 7 / 8),
                                              ("broadcast", 1.0)])
def test_alpha_beta_with_the_nccl_tests_bus_factor(kind, factor):
    c = Collective(kind, 1 << 30, tuple(range(8)), count=3)
    expected = 3 * (H100.intra_node_latency_s + (1 << 30) / H100.intra_node_bytes_per_s * factor)
    assert collective_seconds(c, 8, H100) == pytest.approx(expected, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(KINDS), st.sampled_from(KINDS), st.floats(0.1, 10.0),
       st.integers(1, 1 << 32), st.integers(2, 16), st.integers(1, 64))
def test_a_kinds_cost_factor_scales_that_kind_alone(kind, other, factor, nbytes, n, count):
    """A profile's measured factor for a kind (gloo's reduce-scatter, an all-reduce of the
    whole input) multiplies that kind's whole price, on either link, and no other kind's."""
    scaled = dataclasses.replace(H100, collective_cost_factors={kind: factor})
    for ranks in (tuple(range(n)), tuple(range(0, 8 * n, 8))):  # inside a node, across nodes
        c = Collective(kind, nbytes, ranks, count)
        assert collective_seconds(c, 8, scaled) == pytest.approx(
            factor * collective_seconds(c, 8, H100), rel=1e-12)
        if other != kind:
            d = Collective(other, nbytes, ranks, count)
            assert collective_seconds(d, 8, scaled) == collective_seconds(d, 8, H100)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=2, max_size=16), st.integers(1, 64),
       st.integers(1, 64), st.integers(1, 4))
def test_more_micro_batches_never_a_larger_bubble_fraction(stages, m, more, v):
    assert (pipeline_bubble_fraction(stages, m + more, v)
            <= pipeline_bubble_fraction(stages, m, v) + 1e-12)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 16), st.integers(1, 64), st.floats(0.01, 10.0), st.integers(1, 4))
def test_uniform_stages_have_the_textbook_bubble(p, m, t, v):
    assert pipeline_bubble_fraction([t] * p, m, v) == pytest.approx((p - 1) / (v * m + p - 1))


def _report(works_by_role: list[RoleWork], world: int) -> SimpleNamespace:
    per_role = world // len(works_by_role)
    return SimpleNamespace(
        world_size=world, flops_per_token=6e9, tokens_per_step=1 << 20,
        roles=[SimpleNamespace(rank=i, ranks=list(range(i, world, len(works_by_role))), work=w)
               for i, w in enumerate(works_by_role)][:world // per_role])


def _config(pp: int = 1, m: int = 1, schedule: str = "1F1B", v: int | None = None):
    return SimpleNamespace(
        parallelism=SimpleNamespace(pipeline_parallel_degree=pp, num_pp_microbatches=m,
                                    pipeline_parallel_schedule=schedule,
                                    pipeline_parallel_stages_per_rank=v),
        training=SimpleNamespace(global_batch_size=256, seq_len=4096))


@pytest.mark.parametrize(("schedule", "v"), [("1F1B", 1), ("GPipe", 1),
                                             ("Interleaved1F1B", 2), ("LoopedBFS", 3)])
def test_predict_gives_uniform_pipeline_stages_the_schedules_bubble(schedule, v):
    p, m = 4, 8
    stage = RoleWork(flops={"matmul": 1e15}, micro_batches=m)
    prediction = predict(_config(p, m, schedule, v), _report([stage] * p, 8), 1, 8, H100)
    assert prediction.bubble / prediction.step_seconds == pytest.approx((p - 1) / (v * m + p - 1))
    assert prediction.compute == pytest.approx(1e15 / H100.matmul_flops)
    assert prediction.step_seconds == pytest.approx(prediction.compute + prediction.bubble)


def test_fsdp_all_gathers_hide_under_compute_but_the_first_tensor_parallel_ones_do_not():
    gather = Collective("all_gather", 1 << 26, tuple(range(8)), 32, "forward", "dp_shard")
    one = collective_seconds(dataclasses.replace(gather, count=1), 8, H100)
    compute = RoleWork(flops={"matmul": 1e15}, phase_flops={"forward": 1e15}, micro_batches=1)
    fsdp = RoleWork(compute.flops, 0.0, [gather], compute.phase_flops, micro_batches=1)
    _, exposed, parts = role_seconds(fsdp, 8, H100)
    assert exposed == pytest.approx(one)  # the first of the micro-batch; the rest hidden
    tp = RoleWork(compute.flops, 0.0, [dataclasses.replace(gather, axis="tp")],
                  compute.phase_flops, micro_batches=1)
    assert role_seconds(tp, 8, H100)[1] == pytest.approx(32 * one)
    # With nothing to hide behind, all of FSDP's is exposed too.
    bare = dataclasses.replace(H100, overlap=0.0)
    assert role_seconds(fsdp, 8, bare)[1] == pytest.approx(32 * one)
    assert "exposed all_gather intra-node" in parts


def test_throughput_and_mfu_follow_the_step():
    work = RoleWork(flops={"matmul": 1e15}, micro_batches=1)
    prediction = predict(_config(), _report([work], 8), 1, 8, H100)
    assert tokens_per_second_per_gpu(_config(), prediction, 8) == pytest.approx(
        256 * 4096 / prediction.step_seconds / 8)
    assert mfu(_config(), prediction, H100) == pytest.approx(
        6e9 * (1 << 20) / (prediction.step_seconds * 8 * H100.bf16_flops))
    assert prediction.largest_cost == "compute: matmul"


def test_predict_refuses_a_report_without_work():
    report = _report([RoleWork()], 8)
    report.roles[0].work = None
    with pytest.raises(ValueError, match="work=True"):
        predict(_config(), report, 1, 8, H100)
    with pytest.raises(ValueError, match="cluster has"):
        predict(_config(), _report([RoleWork()], 8), 2, 8, H100)


def test_hardware_fields_are_all_positive():
    with pytest.raises(Exception, match="bf16_flops"):
        Hardware("x", 0.0, 1.0, 1.0, 0.0, 1.0, 0.0)
