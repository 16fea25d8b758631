"""The work preflight records of a role's step (``work=True``; hyper_parallel/preflight/work.py).

On the debug model (4 layers, 64-token rows) at 2 ranks, preflighted in this process:

* FLOPs: the matmul and attention FLOPs torch counts over the ranks are within
  :data:`FLOPS_RTOL` above preflight's per-token figure times the step's tokens (measured
  +4.8 % here, +6.7 % at 128 tokens): the figure leaves out the Gated DeltaNet's intra-chunk
  products (a chunk's query-key and key-value matmuls over its 64 tokens), counting only the
  state's read and update; both count causal attention's unmasked half. The depthwise short
  convolution is counted apart ("other"), at its own FLOPs (torch's formula for its backward
  ignores the groups, 512 times too many here);
* FSDP's forward all-gathers of a micro-batch are the model's parameters (padded to the
  shard count), and every micro-batch of the accumulation gathers them again;
* the tensor-parallel recipe's step all-reduces on the ``tp`` axis in the forward and the
  backward;
* FSDP's collectives are named FSDP's where its group is another axis's too (context
  parallelism, a MoE model's dense parameters under expert parallelism; at 2 and 4 ranks), so
  the planner overlaps them;
* the plan's estimate prices context parallelism's exchanges by mode: each kind's bytes over
  the step are the preflighted step's on the ``cp`` axis (both attention forms, both Gated
  DeltaNet forms, full checkpointing's second forward), and state passing costs compute; and
  tensor parallelism's, from the model's plan, with and without full checkpointing;
* the work extrapolated over the depth (4 + 8 layers -> 12) is the whole-depth step's;
* asking for the work changes nothing else of the report (byte-identical JSON).
"""

from __future__ import annotations

import pytest

from hyper_parallel.preflight.gpus import GPUS
from hyper_parallel.preflight.run import measure_role, preflight
from hyper_parallel.preflight.simulate import simulation_config

SMALL = ("--model.num_hidden_layers=4", "--training.seq_len=64")
FSDP = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2", *SMALL)
TP = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_tp2", *SMALL)
#: How far above preflight's FLOPs-per-token figure the counted FLOPs may be (see above).
FLOPS_RTOL = 0.10


def _config(*argv: str):
    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    return ConfigManager(root_type=HyperTrainer.Config).parse_args(list(argv))


def _parameter_bytes(config, shards: int) -> int:
    import math

    import torch

    from hyper_parallel.preflight.simulate import resolved_model_config

    model_config = resolved_model_config(config)
    from hyper_parallel.models.qwen3_5 import Qwen3_5ForCausalLM

    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(model_config)
    # FSDP pads each parameter's first dimension to a multiple of the shard count.
    return sum(math.ceil(p.shape[0] / shards) * shards * math.prod(p.shape[1:]) * p.element_size()
               for p in model.parameters())


def test_the_fsdp_step_counts_the_models_flops_and_gathers_its_parameters():
    config = _config(*FSDP, "--training.global_batch_size=8")  # 2 micro-batches a rank
    report = preflight(config, GPUS["h100-80gb"], world=2, work=True)
    (role,) = report.roles
    work = role.work
    counted = (work.flops["matmul"] + work.flops["attention"]) * report.world_size
    expected = report.flops_per_token * report.tokens_per_step
    assert expected <= counted <= expected * (1 + FLOPS_RTOL)
    assert work.micro_batches == 2 == role.memory.micro_batches
    gathered = sum(c.bytes * c.count for c in work.collectives
                   if c.kind == "all_gather" and c.phase == "forward")
    assert gathered == 2 * _parameter_bytes(config, 2)
    assert all(c.axis == "dp_shard" and c.group_ranks == (0, 1) for c in work.collectives)
    assert {c.kind for c in work.collectives if c.phase == "backward"} >= {
        "all_gather", "reduce_scatter"}
    assert work.phase_flops["backward"] > work.phase_flops["forward"] > 0


def _estimated_and_recorded(exchanges, config, world: int, work, axis: str, smallest: int = 0
                            ) -> tuple[dict[str, float], dict[str, float]]:
    """Each kind's bytes over the step: the plan's estimate of the exchanges on ``axis``
    (``exchanges``: ``plan.search.tensor_parallel_exchanges`` or
    ``context_parallel_exchanges``) and what the preflighted step's ``work`` issued on it
    (forward and backward, calls of at least ``smallest`` bytes)."""
    from hyper_parallel.plan.space import candidate_of, model_facts

    estimated: dict[str, float] = {}
    for kind, nbytes, calls in exchanges(candidate_of(config, world), config,
                                         model_facts(config)):
        estimated[kind] = estimated.get(kind, 0.0) + nbytes * calls
    recorded: dict[str, float] = {}
    for c in work.collectives:
        if (c.axis == axis and c.phase in ("forward", "backward") and c.kind != "send_recv"
                and c.bytes >= smallest):
            recorded[c.kind] = recorded.get(c.kind, 0.0) + c.bytes * c.count
    return estimated, recorded


#: The replicated norms' gradient reductions, which the estimate leaves out, are under this a
#: call (the debug model's activations are 128 KiB a call).
NORM_GRADIENTS = 4096


def test_the_tensor_parallel_step_all_reduces_on_its_axis():
    """The step all-reduces on the ``tp`` axis in the forward and the backward, and the plan's
    estimate of its exchanges is what it issues (see the next test)."""
    from hyper_parallel.plan.search import tensor_parallel_exchanges

    config = _config(*TP)
    report = preflight(config, GPUS["h100-80gb"], world=2, work=True)
    tp = [c for c in report.roles[0].work.collectives if c.axis == "tp"]
    assert {c.phase for c in tp if c.kind == "all_reduce"} >= {"forward", "backward"}
    assert all(c.group_ranks == (0, 1) for c in tp)
    estimated, recorded = _estimated_and_recorded(tensor_parallel_exchanges, config, 2,
                                                  report.roles[0].work, "tp", NORM_GRADIENTS)
    assert estimated == pytest.approx(recorded, rel=1e-9), (estimated, recorded)


#: Layouts where FSDP's group is another axis's too: under context parallelism FSDP shards over
#: ``dp_shard_cp``, the loss's group; over ``cp`` alone it shares the group with the
#: context-parallel exchanges; a MoE model's dense parameters shard over ``dp_shard_ep``, the
#: loss's group again. name -> (command line, world, FSDP's shards of a dense parameter or
#: None).
SHARED_GROUPS = {
    "fsdp 2 x cp 2": ((*FSDP, "--parallelism.context_parallel_degree=2"), 4, 4),
    "cp 2": ((*FSDP, "--parallelism.data_parallel_shard_degree=1",
              "--parallelism.context_parallel_degree=2"), 2, 2),
    "MoE ep 2 x fsdp 2": (("--module", "qwen3_5_moe", "--config",
                           "qwen3_5_moe_debugmodel_ep2_fsdp2", *SMALL), 4, None),
}


@pytest.mark.parametrize("name", list(SHARED_GROUPS))
def test_fsdps_collectives_are_named_fsdps_on_a_group_it_shares(name):
    """A collective is named by who issued it, so the planner overlaps FSDP's gathers and
    reductions with compute wherever its group is another axis's too (they were named
    ``loss`` or ``cp`` and priced as exposed: a CP candidate of the 9B plan was predicted at
    11.3 s a step, 9.47 s once they are FSDP's). FSDP's forward gathers carry every parameter
    once a micro-batch; the context-parallel exchanges keep their axis; in the forward and the
    backward nothing runs on the loss's name (its reductions are the step's bookkeeping and
    the optimizer's)."""
    from hyper_parallel.preflight.work import FSDP_AXES, FSDP_ISSUED

    argv, world, shards = SHARED_GROUPS[name]
    config = _config(*argv)
    work = preflight(config, GPUS["h100-80gb"], world=world, work=True).roles[0].work
    in_step = [c for c in work.collectives if c.phase in ("forward", "backward")]
    fsdp = [c for c in in_step if c.axis in (*FSDP_AXES, FSDP_ISSUED)]
    assert {c.kind for c in fsdp if c.phase == "backward"} >= {"all_gather", "reduce_scatter"}
    assert not [c for c in in_step if c.axis == "loss"]
    if shards is not None:
        gathered = sum(c.bytes * c.count for c in fsdp
                       if c.kind == "all_gather" and c.phase == "forward")
        assert gathered == work.micro_batches * _parameter_bytes(config, shards)
        assert [c for c in in_step if c.axis == "cp"], "the context-parallel exchanges"
    if name == "cp 2":  # the default modes (ulysses / ulysses): the estimate's exchanges
        from hyper_parallel.plan.search import context_parallel_exchanges

        estimated, recorded = _estimated_and_recorded(context_parallel_exchanges, config, world,
                                                      work, "cp")
        assert estimated == pytest.approx(recorded, rel=1e-9), (estimated, recorded)
    if name == "MoE ep 2 x fsdp 2":  # without checkpointing: the estimate's all-to-alls
        from hyper_parallel.plan.search import expert_parallel_exchanges

        assert _exchanges_by_size(expert_parallel_exchanges, config, world) == \
            _recorded_by_size(work, "ep")


def test_without_work_the_report_is_the_same_and_has_none(monkeypatch):
    import collections

    from hyper_parallel.preflight import measurement_cache, run
    from hyper_parallel.preflight.report import to_json

    # Both simulated here: neither read from a measurement this process or another kept (the
    # plain one would read the recorded one's, and compare it with itself).
    monkeypatch.setenv(measurement_cache.CACHE_ENV, "off")
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())
    monkeypatch.setattr(run, "_WORK", {})
    plain = preflight(_config(*TP, "--training.steps=7"), GPUS["h100-80gb"], world=2)
    assert all(role.work is None for role in plain.roles)
    worked = preflight(_config(*TP, "--training.steps=7"), GPUS["h100-80gb"], world=2,
                       work=True)
    for report in (plain, worked):
        report.seconds = 0.0
        for role in report.roles:
            role.seconds = 0.0
    assert to_json(plain) == to_json(worked)


@pytest.mark.slow
def test_the_work_extrapolated_over_depth_is_the_whole_steps():
    sim = simulation_config(_config(*FSDP, "--model.num_hidden_layers=12"))
    short: list = []
    memory, _ = measure_role(sim, 0, 2, 1.0, work=short)
    assert memory.depth == "4 + 8 layers -> 12"
    whole: list = []
    measure_role(sim, 0, 2, 1.0, extrapolate_depth=False, work=whole)
    (a,), (b,) = short, whole
    assert a.flops == b.flops and a.memory_bytes == b.memory_bytes
    assert a.phase_flops == b.phase_flops
    assert sorted(a.collectives, key=repr) == sorted(b.collectives, key=repr)


def test_a_pipeline_ranks_flops_are_its_stages_share_of_the_models():
    """Each of 2 pipeline ranks runs every row of the step through its half of the layers:
    its matmul FLOPs are about half the one-rank step's (the embedding has none, the output
    projection is the last stage's), and the two stages' sum is the one-rank step's."""
    common = ("--module", "recipes.train_qwen3_5_debug", "--config", "train_qwen3_5_debug",
              *SMALL, "--training.global_batch_size=8", "--training.local_batch_size=8")
    one = preflight(_config(*common), GPUS["h100-80gb"], world=1, work=True)
    pp = preflight(_config(*common, "--parallelism.pipeline_parallel_degree=2",
                           "--parallelism.num_pp_microbatches=4"),
                   GPUS["h100-80gb"], world=2, work=True)
    whole = one.roles[0].work.flops["matmul"]
    stages = [role.work.flops["matmul"] for role in pp.roles]
    assert len(stages) == 2 and sum(stages) == pytest.approx(whole, rel=0.01)
    assert all(0.3 * whole < s < 0.7 * whole for s in stages)
    assert all(role.work.micro_batches == 4 for role in pp.roles)


def test_the_operators_on_dtensors_are_counted():
    """torch dispatches a DTensor operator in C++ straight to its local ones: each still
    costs its sharding propagation on the host, and the step counts them -- FSDP2's sharded
    parameters in the clipping and the optimizer (after the micro-batches; as on a GPU, the
    norms, the scaling and fused AdamW each one operator over the parameters' list), tensor
    parallelism's layers in the forward and the backward too."""
    fsdp = preflight(_config(*FSDP), GPUS["h100-80gb"], world=2, work=True).roles[0].work
    tp = preflight(_config(*TP), GPUS["h100-80gb"], world=2, work=True).roles[0].work
    # the clipping's norms and scaling and AdamW's fused step, on the sharded parameters
    assert fsdp.dtensor_operators >= 3
    assert tp.dtensor_operators > fsdp.dtensor_operators


def test_the_estimates_context_parallel_exchanges_are_the_preflighted_steps():
    """The planner orders its preflights by an estimate that prices context parallelism's
    exchanges by mode, from the model's head counts (``plan.search.context_parallel_exchanges``;
    the modes were one figure, so the 9B plan preflighted the slowest of them): each kind's
    bytes over the step are the ones the preflighted step issues on the ``cp`` axis. Here the
    forms the default modes do not use (the keys and values all-gathered, state passing's maps
    and convolution tokens) under full checkpointing, which issues the forward's again (the
    default modes: the ``cp 2`` case above); and state passing's recurrence costs the
    estimate compute that Ulysses' does not."""
    from hyper_parallel.plan.hardware import datasheet
    from hyper_parallel.plan.search import context_parallel_exchanges, estimate_parts
    from hyper_parallel.plan.space import candidate_of, model_facts

    def cp_config(linear: str):
        return _config(*FSDP, "--parallelism.data_parallel_shard_degree=1",
                       "--parallelism.context_parallel_degree=2",
                       "--parallelism.context_parallel_ulysses_degree=1",
                       f"--parallelism.context_parallel_linear_attention_mode={linear}",
                       "--activation_checkpoint.mode=full")

    config = cp_config("p2p")
    candidate = candidate_of(config, 2)
    assert (candidate.layout.cp_attention, candidate.layout.cp_linear) == ("all_gather", "p2p")
    work = preflight(config, GPUS["h100-80gb"], world=2, work=True).roles[0].work
    estimated, recorded = _estimated_and_recorded(context_parallel_exchanges, config, 2, work,
                                                  "cp")
    assert estimated == pytest.approx(recorded, rel=1e-9), (estimated, recorded)
    facts, hardware = model_facts(config), datasheet("h100-80gb")
    state_passing = estimate_parts(candidate, config, facts, 2, 8, hardware)[0]
    ulysses = estimate_parts(candidate_of(cp_config("ulysses"), 2), config, facts, 2, 8,
                             hardware)[0]
    assert state_passing > ulysses, (state_passing, ulysses)


def _exchanges_by_size(exchanges, config, world: int) -> dict[tuple[str, int], float]:
    """The estimate's calls on an axis by ``(kind, bytes a call)``."""
    from hyper_parallel.plan.space import candidate_of, model_facts

    out: dict[tuple[str, int], float] = {}
    for kind, nbytes, calls in exchanges(candidate_of(config, world), config,
                                         model_facts(config)):
        out[(kind, nbytes)] = out.get((kind, nbytes), 0) + calls
    return out


def _recorded_by_size(work, axis: str) -> dict[tuple[str, int], float]:
    """The preflighted step's forward and backward calls on ``axis`` by ``(kind, bytes)``."""
    out: dict[tuple[str, int], float] = {}
    for c in work.collectives:
        if c.axis == axis and c.phase in ("forward", "backward"):
            out[(c.kind, c.bytes)] = out.get((c.kind, c.bytes), 0) + c.count
    return out


#: Expert parallelism beside tensor parallelism in bf16, and the two checkpointing modes,
#: whose recomputations re-issue different exchanges. name -> (command line, world)
EXPERT_CASES = {
    "ep 2 x tp 2 x fsdp 2, bf16, full checkpointing": (
        ("--parallelism.tensor_parallel_degree=2", "--training.mixed_precision_param=bfloat16",
         "--activation_checkpoint.mode=full"), 8),
    "ep 2 x fsdp 2, selective checkpointing": (("--activation_checkpoint.mode=selective",), 4),
}


@pytest.mark.parametrize("name", list(EXPERT_CASES))
def test_the_estimates_expert_parallel_exchanges_are_the_preflighted_steps(name):
    """The estimate prices expert parallelism's all-to-alls as the step issues them on the
    busiest rank (``plan.search.expert_parallel_exchanges``; they were four all-to-alls of
    the balanced rows a layer in bf16): every call on the ``ep`` axis, by its size, and how
    many. Each layer and micro-batch exchanges the routed rows' counts, dispatches the rank's
    rows, combines the rows it received (1.25 times its share on the busiest rank) and sends
    both gradients back; full checkpointing recomputes all three forward exchanges, selective
    keeps the rows' and exchanges the counts again (without checkpointing: the shared-group
    test above)."""
    from hyper_parallel.plan.search import expert_parallel_exchanges

    extra, world = EXPERT_CASES[name]
    # Two layers: the exchanges are each layer's alike (every layer is a mixture of experts).
    config = _config(*SHARED_GROUPS["MoE ep 2 x fsdp 2"][0], "--model.num_hidden_layers=2",
                     *extra)
    work = preflight(config, GPUS["h100-80gb"], world=world, work=True).roles[0].work
    recorded = _recorded_by_size(work, "ep")
    assert len(recorded) == 3, recorded  # the counts, the dispatched and the received rows
    assert _exchanges_by_size(expert_parallel_exchanges, config, world) == recorded


def test_the_estimates_tensor_parallel_exchanges_are_the_preflighted_steps():
    """The estimate prices tensor parallelism's exchanges from the model's plan
    (``plan.search.tensor_parallel_exchanges``: the row-parallel linears' all-reduces in the
    forward, the column-parallel ones' in the backward, the logits' all-gather; they were four
    all-reduces a layer in bf16, 0.17 s estimated against 1.67 s exposed in the 9B's FSDP 4 x
    TP 2 preflight): each kind's bytes over the step are the ones the preflighted step issues
    on the ``tp`` axis. Here under full checkpointing, whose recomputation issues each
    layer's mixer all-reduce again (without it: the test above)."""
    from hyper_parallel.plan.search import tensor_parallel_exchanges

    config = _config(*TP, "--activation_checkpoint.mode=full")
    work = preflight(config, GPUS["h100-80gb"], world=2, work=True).roles[0].work
    estimated, recorded = _estimated_and_recorded(tensor_parallel_exchanges, config, 2, work,
                                                  "tp", NORM_GRADIENTS)
    assert estimated == pytest.approx(recorded, rel=1e-9), (estimated, recorded)
