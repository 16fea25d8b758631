"""A layout's optimizer step in seconds, priced from the work preflight recorded of its roles.

Each role's recorded work (:class:`~hyper_parallel.plan.work.RoleWork`: the FLOPs torch
counted, the bytes of the memory-bound operators, every collective) is priced with a
:class:`~hyper_parallel.plan.hardware.Hardware` profile:

* **compute**: matmul FLOPs at the achievable matmul rate, attention FLOPs at the attention
  rate, the memory-bound operators' bytes at the achievable HBM bandwidth and the operators'
  fixed host cost (the profile's per-operator overheads: 0 on a GPU's datasheet, measured on a
  CPU), *summed*: a step
  is a sequence of kernels and each one is bound by one resource, so their times add (the
  ``max`` of a roofline holds inside one kernel, not across a step's);
* **collectives**: alpha-beta, ``t = alpha + (S / B) x f`` with nccl-tests' bus factors ``f``
  (all_reduce ``2(n-1)/n``; all_gather, reduce_scatter, all_to_all ``(n-1)/n``; broadcast and
  a send 1), on the link the group crosses: NVLink inside a node, the network when its ranks
  sit on two or more nodes (global rank ``r`` on node ``r // gpus_per_node``), times the
  profile's measured factor for a kind its backend runs otherwise (gloo's reduce-scatter is an
  all-reduce of the whole input: ``Hardware.collective_cost_factors``);
* **overlap**, as the engine has it: FSDP's all-gathers (prefetched a layer ahead) and its
  backward reduce-scatters (and HSDP's all-reduces) run under the same phase's compute, all but
  the phase's first all-gather and last reduce-scatter of each micro-batch, up to
  ``hardware.overlap`` of that compute (FSDP2 overlaps through the device's streams: on a
  CPU, which has none, each of them blocks its rank, and the profile's overlap is 0);
  tensor-parallel, expert all-to-all, context-parallel and pipeline send/recv collectives, the
  step's own token-count and loss reductions and the optimizer's gradient-norm reduction wait
  on or are waited for by compute: exposed;
* **the pipeline's bubble**: each pipeline rank is busy ``T_r`` per micro-batch; the step is
  ``m x max T_r + (sum T_r - max T_r) / v`` for ``m`` micro-batches and ``v`` stages per rank,
  i.e. the bubble fraction ``(p-1)/(m+p-1)`` for 1F1B and GPipe and ``(p-1)/(v m+p-1)`` for the
  interleaved and looped breadth-first schedules on uniform stages (Narayanan et al. 2021,
  section 2.2), the slowest rank's excess over the others' in general.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyper_parallel.plan.hardware import Hardware
from hyper_parallel.plan.work import FSDP_AXES, Collective, RoleWork, crosses_nodes

#: nccl-tests' bus-bandwidth factors (``doc/PERFORMANCE.md``): bytes a rank moves over its
#: link per byte of the array, for a group of ``n``.
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}


@dataclass(frozen=True)
class Prediction:
    """One layout's predicted optimizer step and its parts (seconds)."""

    step_seconds: float
    compute: float
    """The slowest role's compute (all its micro-batches)."""
    exposed_comm: float
    """Its communication that no compute hides."""
    bubble: float
    """The pipeline schedule's idle time of the slowest rank (0 without a pipeline)."""
    largest_cost: str
    """The part that costs most: ``compute: matmul``, ``exposed all_gather inter-node``,
    ``pipeline bubble``, ..."""
    costs: tuple[tuple[str, float], ...] = ()
    """Every part of the slowest role's step, named as :attr:`largest_cost` names one."""
    model_flops: float = 0.0
    """The step's useful FLOPs over all ranks (preflight's per-token figure x tokens)."""
    world: int = 0
    rank: int = 0
    """The representative rank of the role that sets the step."""


def collective_seconds(c: Collective, gpus_per_node: int, hardware: Hardware) -> float:
    """All ``c.count`` calls of a collective, alpha-beta on the link its group crosses."""
    n = len(c.group_ranks)
    if n < 2:
        return 0.0
    if crosses_nodes(c.group_ranks, gpus_per_node):
        alpha, bandwidth = hardware.inter_node_latency_s, hardware.inter_node_bytes_per_s
    else:
        alpha, bandwidth = hardware.intra_node_latency_s, hardware.intra_node_bytes_per_s
    factor = hardware.collective_cost_factors.get(c.kind, 1.0)
    return c.count * (alpha + c.bytes / bandwidth * BUS_FACTORS[c.kind](n)) * factor


def _link(c: Collective, gpus_per_node: int) -> str:
    return "inter-node" if crosses_nodes(c.group_ranks, gpus_per_node) else "intra-node"


def _compute_parts(work: RoleWork, hardware: Hardware) -> dict[str, float]:
    return {
        "compute: matmul": work.flops.get("matmul", 0.0) / hardware.matmul_flops,
        "compute: attention": work.flops.get("attention", 0.0) / hardware.attention_flops,
        "compute: memory-bound": work.memory_bytes / hardware.memory_bytes_per_s
        + work.flops.get("other", 0.0) / hardware.matmul_flops,
        "compute: operator overhead": work.operators * hardware.operator_overhead_s
        + work.dtensor_operators * hardware.dtensor_operator_overhead_s,
    }


def _phase_compute(work: RoleWork, compute: float) -> dict[str, float]:
    """The compute seconds by phase, in proportion to the phase's FLOPs and bytes."""
    total = sum(work.phase_flops.values())
    if total <= 0:
        return {"forward": compute / 3, "backward": 2 * compute / 3}
    return {phase: compute * flops / total for phase, flops in work.phase_flops.items()}


def role_seconds(work: RoleWork, gpus_per_node: int, hardware: Hardware
                 ) -> tuple[float, float, dict[str, float]]:
    """``(compute, exposed communication, parts)`` of one role's step."""
    parts = _compute_parts(work, hardware)
    compute = sum(parts.values())
    by_phase = _phase_compute(work, compute)
    m = max(1, work.micro_batches)
    overlappable: dict[str, list[tuple[Collective, float]]] = {}
    exposed_parts: dict[str, float] = {}

    def expose(c: Collective, seconds: float) -> None:
        name = f"exposed {c.kind} {_link(c, gpus_per_node)}"
        exposed_parts[name] = exposed_parts.get(name, 0.0) + seconds

    for c in work.collectives:
        seconds = collective_seconds(c, gpus_per_node, hardware)
        if c.axis in FSDP_AXES and c.phase in ("forward", "backward") and c.kind in (
                "all_gather", "reduce_scatter", "all_reduce"):
            overlappable.setdefault(c.phase, []).append((c, seconds))
        else:
            expose(c, seconds)
    for phase, items in overlappable.items():
        # Per micro-batch, the phase's first all-gather (nothing to hide behind yet) and its
        # last reduce-scatter (nothing left to compute) are exposed; the rest run under the
        # phase's compute, as much as the hardware overlaps.
        hidden_budget = hardware.overlap * by_phase.get(phase, 0.0)
        rest: list[tuple[Collective, float]] = []
        for c, seconds in items:
            calls = c.count
            edge = {"all_gather": "first", "reduce_scatter": "last", "all_reduce": "last"}
            ends = min(calls, m) if edge.get(c.kind) else 0
            if ends:
                expose(c, seconds * ends / calls)
            rest.append((c, seconds * (calls - ends) / calls))
        total_rest = sum(s for _, s in rest)
        spill = max(0.0, total_rest - hidden_budget)
        for c, seconds in rest:
            if total_rest > 0 and spill > 0:
                expose(c, spill * seconds / total_rest)
    parts.update(exposed_parts)
    return compute, sum(exposed_parts.values()), parts


def predict(config: Any, report: Any, nodes: int, gpus_per_node: int,
            hardware: Hardware) -> Prediction:
    """The step time of ``config`` (a ``HyperTrainer.Config``) on ``nodes`` x
    ``gpus_per_node`` GPUs of ``hardware``, from ``report`` (its preflight made with
    ``work=True``): the step of the slowest role, with the engine's overlap and the pipeline
    schedule's bubble (see the module docstring)."""
    world = nodes * gpus_per_node
    if report.world_size != world:
        raise ValueError(f"the preflight is of {report.world_size} ranks, the cluster has "
                         f"{nodes} x {gpus_per_node} = {world}")
    if not report.roles or any(getattr(r, "work", None) is None for r in report.roles):
        raise ValueError("predict needs the work of every role: preflight it with work=True")
    roles = []
    for role in report.roles:
        compute, exposed, parts = role_seconds(role.work, gpus_per_node, hardware)
        roles.append((compute + exposed, compute, exposed, parts, role.rank))
    p = config.parallelism
    busy, compute, exposed, parts, rank = max(roles, key=lambda r: r[0])
    bubble = 0.0
    if len(roles) > 1 and p.pipeline_parallel_degree > 1:
        m = max(1, report.roles[0].work.micro_batches)
        v = _stages_per_rank(config)
        bubble = (sum(r[0] for r in roles) - busy) / (m * v)
    step = busy + bubble
    parts = dict(parts)
    if bubble:
        parts["pipeline bubble"] = bubble
    largest = max(parts.items(), key=lambda kv: kv[1])[0] if parts else "compute: matmul"
    model_flops = report.flops_per_token * report.tokens_per_step
    return Prediction(step_seconds=step, compute=compute, exposed_comm=exposed, bubble=bubble,
                      largest_cost=largest, costs=tuple(sorted(parts.items())),
                      model_flops=model_flops, world=world, rank=rank)


def _stages_per_rank(config: Any) -> int:
    """Stages each pipeline rank runs (the engine's default: 2 for the multi-stage schedules)."""
    p = config.parallelism
    if p.pipeline_parallel_schedule in ("GPipe", "1F1B"):
        return 1
    return p.pipeline_parallel_stages_per_rank or 2


def pipeline_bubble_fraction(stage_seconds: list[float], micro_batches: int,
                             stages_per_rank: int = 1) -> float:
    """The bubble's share of the step for pipeline ranks busy ``stage_seconds`` per
    micro-batch each (see the module docstring)."""
    busiest = max(stage_seconds)
    m, v = micro_batches, stages_per_rank
    bubble = (sum(stage_seconds) - busiest) / v
    return bubble / (m * busiest + bubble)


def tokens_per_second_per_gpu(config: Any, prediction: Prediction, world: int) -> float:
    """The global batch's tokens over the predicted step, per GPU."""
    tokens = config.training.global_batch_size * config.training.seq_len
    return tokens / prediction.step_seconds / world


def mfu(config: Any, prediction: Prediction, hardware: Hardware) -> float:
    """Model FLOPs utilization: the step's useful FLOPs (preflight's per-token count, no
    recomputation) over the predicted step and the GPUs' peak."""
    world = prediction.world or 1
    return prediction.model_flops / (prediction.step_seconds * world * hardware.bf16_flops)


__all__ = ["BUS_FACTORS", "Prediction", "collective_seconds", "mfu", "pipeline_bubble_fraction",
           "predict", "role_seconds", "tokens_per_second_per_gpu"]
