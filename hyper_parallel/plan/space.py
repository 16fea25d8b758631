"""The layouts a plan considers, and why it drops the ones it drops.

A *layout* is the parallel degrees (``data_parallel_replicate`` x ``data_parallel_shard`` x
context x tensor x pipeline x expert = the world) with the pipeline's schedule and virtual
stages and the context-parallel modes; a *candidate* is a layout with the local batch (or,
under a pipeline, the pipeline micro-batch count) and the activation checkpointing mode, at the
recipe's global batch and sequence length. Everything else in the recipe stays as it is.

Families are dropped in this order, each with its reason (``Dropped``):

0. **a different spelling of a layout**: replicas without a shard axis are the FSDP layout of
   that degree (:func:`same_run`), searched once, as FSDP;

1. **the engine's rules**, by calling the engine's own checks on the candidate's configuration
   (nothing is restated here): ``ParallelDims.from_parallelism`` (degrees against the world,
   context parallelism with expert parallelism), the spec's and the model's
   ``update_from_config`` through preflight's ``resolved_model_config`` (tensor parallelism
   against every head count it shards, experts over EP, what a model refuses),
   ``ParallelDims.validate_against_model`` and ``validate_training`` (the global batch over the
   data-parallel ranks, the sequence over cp x tp, the pipeline's micro-batches), and
   ``models.pipelining.plan_stages`` (layers over stages, the schedule's stages per rank);
2. **the cluster**: tensor- and expert-parallel groups stay inside a node (their collectives
   are on every layer's critical path); a group's ranks are read off the engine's mesh order
   (``pp`` innermost), global rank ``r`` on node ``r // gpus_per_node``;
3. **a memory floor**: every rank holds at least its share of the parameters, gradients and
   optimizer state of the stages it runs: the exact bytes of the model's parameters (built on
   ``meta``), over the ranks that can split them (the ranks of its pipeline position, but for
   HSDP's replicas), with preflight's own allowances on top. It never exceeds what preflight
   would measure (the fullest rank holds at least the average, and replicated tensors only add),
   so a layout above the GPU by this floor cannot fit.

The survivors are preflighted in order of promise (:mod:`.search`).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hyper_parallel.utils.errors import ConfigError

#: Activation checkpointing, from the least recomputation to the most (the engine's values;
#: ``none`` is written as the recipe spells "off" when it is off already).
AC_MODES = ("none", "selective", "full")
#: The JSON names of the degrees, in the order the table shows them.
DEGREES = ("dp_replicate", "dp_shard", "tp", "pp", "cp", "ep")
#: The parallelism field of each degree (the engine's own table).
SINGLE_STAGE = ("GPipe", "1F1B")
MULTI_STAGE = ("Interleaved1F1B", "LoopedBFS")
#: Virtual stages per pipeline rank the space tries for the multi-stage schedules.
VIRTUAL_STAGES = (2, 4)
#: The context-parallel modes: full attention (Ulysses all-to-all, or K/V all-gathered) and
#: the Gated DeltaNet (Ulysses, or state passing).
CP_ATTENTION = ("ulysses", "all_gather")
CP_LINEAR = ("ulysses", "p2p")


@dataclass(frozen=True, order=True)
class Layout:
    """The parallel degrees and the modes that go with them."""

    dp_replicate: int = 1
    dp_shard: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    pp_schedule: str = ""
    pp_stages_per_rank: int = 1
    cp_attention: str = ""
    cp_linear: str = ""

    def degrees(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in DEGREES}

    def describe(self) -> dict[str, Any]:
        """The JSON object of the layout (degree name: value; the modes only where used)."""
        out: dict[str, Any] = self.degrees()
        if self.pp > 1:
            out["pp_schedule"] = self.pp_schedule
            out["pp_stages_per_rank"] = self.pp_stages_per_rank
        if self.cp > 1:
            out["cp_attention"] = self.cp_attention
            out["cp_linear_attention"] = self.cp_linear
        return out


@dataclass(frozen=True, order=True)
class Candidate:
    """One point of the space: a layout, its batch split and its checkpointing."""

    layout: Layout
    local_batch_size: int
    pp_microbatches: int = 1
    activation_checkpoint: str = "none"

    def describe(self, global_batch: int) -> dict[str, Any]:
        out = self.layout.describe()
        dp = self.layout.dp_replicate * self.layout.dp_shard
        out["local_batch_size"] = self.local_batch_size
        out["grad_accum"] = global_batch // (self.local_batch_size * dp)
        if self.layout.pp > 1:
            out["pp_microbatches"] = self.pp_microbatches
        out["activation_checkpoint"] = self.activation_checkpoint
        return out

    @property
    def ac_level(self) -> int:
        return AC_MODES.index(self.activation_checkpoint)


def label(layout: dict[str, Any]) -> str:
    """``fsdp 8 x ep 16, lbs 16, ac full``: a layout (or a family's part of one) in a line."""
    names = {"dp_replicate": "replicate", "dp_shard": "fsdp"}
    def shown(v: Any) -> str:
        return "|".join(map(str, v)) if isinstance(v, list) else str(v)

    degrees = [f"{names.get(k, k)} {shown(v)}" for k, v in layout.items()
               if k in DEGREES and v != 1]
    rest = []
    short = {"pp_schedule": "", "pp_stages_per_rank": "v", "cp_attention": "attn",
             "cp_linear_attention": "gdn", "local_batch_size": "lbs", "grad_accum": "accum",
             "pp_microbatches": "mb", "activation_checkpoint": "ac"}
    for key, value in layout.items():
        if key in short and not (key == "grad_accum" and value == 1) and not (
                key == "pp_stages_per_rank" and value == 1):
            rest.append(f"{short[key]} {value}".strip())
    head = " x ".join(degrees)
    if not head and any(k in DEGREES for k in layout):
        head = "no parallelism"
    return ", ".join(p for p in [head, *rest] if p)


@dataclass
class Dropped:
    """A family of layouts the plan does not run, and why."""

    layout: dict[str, Any]
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"layout": self.layout, "reason": self.reason}


# ----------------------------------------------------------------------- the configuration
def copy_config(config: Any) -> Any:
    """A deep copy of a ``HyperTrainer.Config`` sharing its model spec (functions, a model)."""
    spec = config.model_spec
    return copy.deepcopy(config, {id(spec): spec} if spec is not None else None)


def _set(section: Any, name: str, value: Any) -> None:
    """``section.name = value`` unless it means that already (an unset FSDP degree is 1, an
    off checkpointing ``off`` or ``none``): the recipe keeps its own spelling."""
    current = getattr(section, name)
    if name == "data_parallel_shard_degree" and (current or 1) == value and current != -1:
        return
    if current != value:
        setattr(section, name, value)


def apply(base: Any, candidate: Candidate) -> Any:
    """``base`` (a ``HyperTrainer.Config``) with the candidate's layout, batch split and
    checkpointing: a copy; everything else is the recipe's."""
    return _set_candidate(copy_config(base), base, candidate)


#: The sections :func:`apply` sets; the others are the recipe's.
CANDIDATE_SECTIONS = ("parallelism", "training", "activation_checkpoint")


def checked_view(base: Any, candidate: Candidate) -> Any:
    """What :func:`apply` makes, for the engine's checks only (:func:`engine_check`, which
    reads): the sections a candidate sets are copies, the others ``base``'s own. The space
    checks thousands of candidates; a deep copy of the whole recipe each was most of its
    time."""
    sections = {name: copy.copy(getattr(base, name)) for name in CANDIDATE_SECTIONS}
    return _set_candidate(dataclasses.replace(base, **sections), base, candidate)


def _set_candidate(config: Any, base: Any, candidate: Candidate) -> Any:
    """``config`` (a copy of ``base`` in :data:`CANDIDATE_SECTIONS` at least) with the
    candidate's settings."""
    p, lay = config.parallelism, candidate.layout
    _set(p, "data_parallel_replicate_degree", lay.dp_replicate)
    _set(p, "data_parallel_shard_degree", lay.dp_shard)
    _set(p, "tensor_parallel_degree", lay.tp)
    _set(p, "context_parallel_degree", lay.cp)
    _set(p, "expert_parallel_degree", lay.ep)
    _set(p, "expert_tensor_parallel_degree", 1)  # the only degree the engine implements
    same_pipeline = (base.parallelism.pipeline_parallel_degree == lay.pp
                     and (lay.pp == 1 or _stages_of(base.parallelism) == (
                         lay.pp_schedule, lay.pp_stages_per_rank)))
    _set(p, "pipeline_parallel_degree", lay.pp)
    defaults = type(p)()
    if not same_pipeline:
        # The planner's stages are the engine's balanced split: a split of the recipe's
        # written for another pipeline would contradict them.
        for name in ("pipeline_parallel_layer_split", "pipeline_parallel_layers_per_stage",
                     "module_fqns_per_model_part", "pipeline_parallel_stages_per_rank"):
            _set(p, name, getattr(defaults, name))
    if lay.pp > 1:
        _set(p, "pipeline_parallel_schedule", lay.pp_schedule)
        if lay.pp_schedule in MULTI_STAGE and lay.pp_stages_per_rank != 2:
            _set(p, "pipeline_parallel_stages_per_rank", lay.pp_stages_per_rank)
        _set(p, "num_pp_microbatches", candidate.pp_microbatches)
    else:
        for name in ("pipeline_parallel_schedule", "num_pp_microbatches",
                     "pipeline_parallel_stages_per_rank", "pipeline_parallel_layer_split",
                     "pipeline_parallel_layers_per_stage", "module_fqns_per_model_part"):
            _set(p, name, getattr(defaults, name))
        if base.parallelism.pipeline_parallel_degree > 1:
            for name in ("pipeline_parallel_first_stage_less_layers",
                         "pipeline_parallel_last_stage_less_layers"):
                _set(p, name, getattr(defaults, name))
    if lay.cp > 1:
        _set(p, "context_parallel_ulysses_degree",
             None if lay.cp_attention == "ulysses" else 1)
        _set(p, "context_parallel_linear_attention_mode", lay.cp_linear)
    _set(config.training, "local_batch_size", candidate.local_batch_size)
    ac = config.activation_checkpoint
    mode = candidate.activation_checkpoint
    if mode == "none":
        if ac.mode not in ("off", "none"):
            _set(ac, "mode", "off")
            _set(ac, "num_layers", None)
    elif ac.mode != mode:
        _set(ac, "mode", mode)
        _set(ac, "num_layers", None)
    return config


def _stages_of(parallelism: Any) -> tuple[str, int]:
    schedule = parallelism.pipeline_parallel_schedule
    v = parallelism.pipeline_parallel_stages_per_rank or (1 if schedule in SINGLE_STAGE else 2)
    return schedule, v


def candidate_of(config: Any, world: int) -> Candidate | None:
    """The candidate a configuration is (its own layout, to show it among the plan's), or
    None when its degrees do not make ``world``."""
    p = config.parallelism
    shard = p.data_parallel_shard_degree or 1
    others = (p.data_parallel_replicate_degree * p.tensor_parallel_degree
              * p.pipeline_parallel_degree * p.context_parallel_degree
              * p.expert_parallel_degree)
    if shard == -1:
        if world % others:
            return None
        shard = world // others
    if shard * others != world:
        return None
    schedule, v = _stages_of(p) if p.pipeline_parallel_degree > 1 else ("", 1)
    cp = p.context_parallel_degree
    layout = Layout(
        dp_replicate=p.data_parallel_replicate_degree, dp_shard=shard,
        tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree, cp=cp,
        ep=p.expert_parallel_degree, pp_schedule=schedule, pp_stages_per_rank=v,
        cp_attention=("" if cp == 1 else "ulysses" if p.context_parallel_ulysses_degree in (
            None, cp) else "all_gather"),
        cp_linear="" if cp == 1 else p.context_parallel_linear_attention_mode)
    mode = config.activation_checkpoint.mode
    return Candidate(layout, config.training.local_batch_size,
                     p.num_pp_microbatches if layout.pp > 1 else 1,
                     "none" if mode in ("off", "none") else mode)


# ----------------------------------------------------------------------- the model's facts
@dataclass
class ModelFacts:
    """What the plan reads off the recipe's model once: its Config as the run resolves it,
    its pipeline units and their parameters' bytes (built on ``meta``)."""

    model_config: Any
    model: Any
    units: list[str]
    num_layers: int
    unit_bytes: dict[str, int]
    """Per pipeline unit: parameters + gradients + optimizer state, exact, unsharded."""
    total_bytes: int
    parameters: int
    flops_per_token: float
    num_experts: int = 0


def optimizer_bytes_per_element(config: Any, dtype: Any) -> float:
    """The optimizer state one trainable element of ``dtype`` keeps, measured: the recipe's
    optimizer built by its Config on two parameters of different sizes and stepped once (the
    slope: a per-tensor constant such as Adam's ``step`` is left out, so it is a floor)."""
    import torch

    sizes = (64, 128)
    held = []
    for n in sizes:
        module = torch.nn.Module()
        module.weight = torch.nn.Parameter(torch.zeros(n, dtype=dtype))
        optimizer = config.optimizer.build(model_parts=[module])
        module.weight.grad = torch.zeros_like(module.weight)
        optimizer.step()
        held.append(sum(v.numel() * v.element_size() for opt in optimizer
                        for state in opt.state.values() for v in state.values()
                        if isinstance(v, torch.Tensor)))
    return max(0.0, (held[1] - held[0]) / (sizes[1] - sizes[0]))


def model_facts(config: Any) -> ModelFacts:
    """Build the recipe's model on ``meta`` (the run's own resolution of it, frozen modules
    frozen) and read its units, their bytes and its FLOPs per token."""
    import torch

    from hyper_parallel.preflight.flops import flops_per_token
    from hyper_parallel.preflight.simulate import resolved_model_config
    from hyper_parallel.runtime.model_setup import freeze_parameters

    model_config = resolved_model_config(config)
    with torch.device("meta"):
        model = model_config.build()
    freeze_parameters(model, config.training.freeze_modules)
    units = list(model.pipeline_units())
    per_element: dict[Any, float] = {}
    unit_bytes: dict[str, int] = {}
    seen: set[int] = set()
    total = count = 0
    for unit in units:
        held = 0
        for p in model.get_submodule(unit).parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            count += p.numel()
            size = p.numel() * p.element_size()
            if p.requires_grad:
                if p.dtype not in per_element:
                    per_element[p.dtype] = optimizer_bytes_per_element(config, p.dtype)
                size += p.numel() * p.element_size() + int(p.numel() * per_element[p.dtype])
            held += size
        unit_bytes[unit] = held
        total += held
    from hyper_parallel.models.pipelining import _is_layer

    return ModelFacts(
        model_config=model_config, model=model, units=units,
        num_layers=sum(1 for u in units if _is_layer(u)), unit_bytes=unit_bytes,
        total_bytes=total, parameters=count,
        flops_per_token=flops_per_token(model, model_config, config.training.seq_len),
        num_experts=int(getattr(model_config, "num_experts", 0) or 0))


# ----------------------------------------------------------------------- the rules
def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def factorizations(world: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every ordered ``parts``-tuple of positive integers whose product is ``world``."""
    if parts == 1:
        yield (world,)
        return
    for d in divisors(world):
        for rest in factorizations(world // d, parts - 1):
            yield (d, *rest)


def engine_check(config: Any, world: int, facts: ModelFacts, *, training: bool = True) -> None:
    """The engine's own checks of ``config`` at ``world`` ranks, before anything is built; a
    ``ConfigError`` is the run's (see the module docstring)."""
    from types import SimpleNamespace

    from hyper_parallel.models.pipelining import plan_stages
    from hyper_parallel.preflight.simulate import resolved_model_config
    from hyper_parallel.runtime.parallel_dims import ParallelDims

    dims = ParallelDims.from_parallelism(config.parallelism, world)
    resolved_model_config(config)
    dims.validate_against_model(SimpleNamespace(config=facts.model_config),
                                seq_len=config.training.seq_len)
    if training:
        dims.validate_training(config.training)
    if dims.pp > 1:
        plan_stages(facts.units, facts.num_layers, config.parallelism)


def group_ranks(layout: Layout, world: int, axis: str) -> list[tuple[int, ...]]:
    """The global ranks of every group along ``axis`` (a ``ParallelDims`` dim name) of the
    engine's mesh (:meth:`ParallelDims.mesh_dims`, row-major: ``pp`` innermost)."""
    from hyper_parallel.runtime.parallel_dims import ParallelDims

    dims = ParallelDims(dp_replicate=layout.dp_replicate, dp_shard=layout.dp_shard,
                        cp=layout.cp, tp=layout.tp, pp=layout.pp, ep=layout.ep,
                        world_size=world)
    names, sizes = dims.mesh_dims()
    if axis not in names:
        return []
    index = names.index(axis)
    stride = math.prod(sizes[index + 1:])
    groups = []
    for rank in range(world):
        if (rank // stride) % sizes[index] == 0:
            groups.append(tuple(rank + i * stride for i in range(sizes[index])))
    return groups


def outside_node(layout: Layout, world: int, gpus_per_node: int) -> str | None:
    """Why a layout's tensor- or expert-parallel groups leave a node (None: they do not)."""
    from hyper_parallel.plan.work import crosses_nodes, nodes_spanned

    for axis, what in (("tp", "tensor"), ("ep", "expert")):
        groups = group_ranks(layout, world, axis)
        wide = [g for g in groups if crosses_nodes(g, gpus_per_node)]
        if wide:
            g = wide[0]
            span = nodes_spanned(g, gpus_per_node)
            why = (f"its {what}-parallel groups span {span} nodes (ranks "
                   f"{', '.join(map(str, g[:4]))}{', ...' if len(g) > 4 else ''}")
            if len(g) <= gpus_per_node:
                why += f": {g[1] - g[0]} apart, the mesh's axes inside {axis} multiply to that"
            return (why + f"); {what} parallelism stays inside a node of {gpus_per_node} "
                    "GPUs, where its every-layer collectives run on NVLink")
    return None


def held_floor(layout: Layout, config: Any, facts: ModelFacts, world: int) -> tuple[int, int]:
    """``(bytes, pipeline rank)``: the least the fullest rank of the fullest pipeline position
    holds between steps (parameters, gradients, optimizer state): its position's share over
    the ranks that split it (see the module docstring), and that position."""
    from hyper_parallel.models.pipelining import plan_stages, stages_of_rank

    if layout.pp > 1:
        stages = plan_stages(facts.units, facts.num_layers, config.parallelism)
        per_rank = [sum(facts.unit_bytes[u] for s in stages_of_rank(r, layout.pp, len(stages))
                        for u in stages[s]) for r in range(layout.pp)]
    else:
        per_rank = [facts.total_bytes]
    held = max(per_rank)
    return held // sharers(layout, world), per_rank.index(held)


def sharers(layout: Layout, world: int) -> int:
    """The ranks that can split one pipeline position's state: all of them but HSDP's
    replicas. The replicas hold a copy each only beside a shard axis (``dp_shard``, or ``cp``
    that FSDP shards over too); alone, FSDP shards over them (the models'
    ``data_parallel_mesh``), so they count as sharers -- a floor must never count a copy that
    is not there."""
    replicas = layout.dp_replicate if (layout.dp_shard > 1 or layout.cp > 1) else 1
    return world // (layout.pp * replicas)


def memory_floor(layout: Layout, config: Any, facts: ModelFacts, world: int) -> tuple[int, int]:
    """``(bytes, pipeline rank)``: :func:`held_floor` with preflight's allowances on top (the
    CUDA context, NCCL's buffers for the layout's process groups, fragmentation): at most
    what preflight would measure for that rank."""
    from types import SimpleNamespace

    from hyper_parallel.preflight.gpus import overhead_bytes
    from hyper_parallel.preflight.simulate import process_groups
    from hyper_parallel.runtime.parallel_dims import ParallelDims

    allocated, rank = held_floor(layout, config, facts, world)
    dims = ParallelDims(dp_replicate=layout.dp_replicate, dp_shard=layout.dp_shard,
                        cp=layout.cp, tp=layout.tp, pp=layout.pp, ep=layout.ep,
                        world_size=world)
    groups = process_groups(SimpleNamespace(parallel_dims=dims))
    return allocated + sum(overhead_bytes(allocated, groups).values()), rank


# ----------------------------------------------------------------------- the space
@dataclass
class Space:
    """The candidates that survive the rules, by layout, and the families dropped."""

    world: int
    gpus_per_node: int
    global_batch: int
    layouts: dict[Layout, list[Candidate]] = field(default_factory=dict)
    dropped: list[Dropped] = field(default_factory=list)
    floors: dict[Layout, int] = field(default_factory=dict)
    """The memory floor of each surviving layout."""
    considered: int = 0
    """The layouts (degrees and modes) the space holds before any rule."""

    @property
    def candidates(self) -> list[Candidate]:
        return [c for cs in self.layouts.values() for c in cs]


def _layouts(world: int, facts: ModelFacts) -> Iterator[Layout]:
    """Every layout of ``world`` ranks: the degrees, then each one's modes."""
    for rep, shard, tp, pp, cp, ep in factorizations(world, 6):
        base = Layout(rep, shard, tp, pp, cp, ep)
        schedules: list[tuple[str, int]] = [("", 1)]
        if pp > 1:
            schedules = [(s, 1) for s in SINGLE_STAGE] + [
                (s, v) for s in MULTI_STAGE for v in VIRTUAL_STAGES
                if pp * v <= facts.num_layers]
        modes = [("", "")] if cp == 1 else list(itertools.product(CP_ATTENTION, CP_LINEAR))
        for (schedule, v), (attention, linear) in itertools.product(schedules, modes):
            yield dataclasses.replace(base, pp_schedule=schedule, pp_stages_per_rank=v,
                                      cp_attention=attention, cp_linear=linear)


#: Why a replicate-only layout is not a candidate of its own (:func:`same_run`).
SAME_RUN = ("the same run as the layout with these replicas as its FSDP degree (fsdp N in "
            "place of replicate N): without a shard axis FSDP shards over the replicas (the "
            "models' data_parallel_mesh), so the ranks, their shards and every collective are "
            "the same; it is searched there")


def same_run(layout: Layout) -> Layout | None:
    """The layout that is the same run as ``layout``, when ``layout`` is a different spelling
    of it (None: it is not). Replicas without a shard axis (no ``dp_shard``, no ``cp``, which
    FSDP shards over too) are what FSDP shards over (``data_parallel_mesh``): the same ranks
    in the same mesh position as ``dp_shard`` of that degree (``dp_replicate`` and
    ``dp_shard`` are adjacent, outermost), the same shards and collectives, only the axis
    named otherwise; so they are one candidate, spelled as FSDP. Not beside ``ep``: the MoE
    model's dense mesh is then HSDP ``(dp_replicate, ep)``, a different run."""
    if layout.dp_replicate > 1 and layout.dp_shard == 1 and layout.cp == 1 and layout.ep == 1:
        return dataclasses.replace(layout, dp_replicate=1, dp_shard=layout.dp_replicate)
    return None


def _batch_points(layout: Layout, global_batch: int, base_lbs: int
                  ) -> list[tuple[int, int]]:
    """``(local batch, pipeline micro-batches)`` of a layout at the global batch: without a
    pipeline every local batch that splits a data-parallel rank's rows evenly (the engine
    refuses the others); with one, the recipe's local batch (the step's rows are the same
    whatever the accumulation: one schedule runs them) and the micro-batch counts that fill
    the schedule's rounds (multiples of the degree; GPipe any)."""
    dp = layout.dp_replicate * layout.dp_shard
    if global_batch % dp:
        return [(1, 1)]  # the engine names the problem
    rows = global_batch // dp
    if layout.pp == 1:
        return [(lbs, 1) for lbs in divisors(rows)]
    lbs = base_lbs if rows % base_lbs == 0 else rows
    split = rows // layout.ep if rows % layout.ep == 0 else rows
    counts = [m for m in divisors(split)
              if layout.pp_schedule == "GPipe" or m % layout.pp == 0]
    return [(lbs, m) for m in counts] or [(lbs, split)]


def build_space(base: Any, world: int, gpus_per_node: int, gpu: Any, facts: ModelFacts
                ) -> Space:
    """The candidates of ``base`` on ``world`` ranks, ``gpus_per_node`` a node, and the
    families dropped (see the module docstring)."""
    from hyper_parallel.preflight.gpus import GIB

    gbs = base.training.global_batch_size
    space = Space(world, gpus_per_node, gbs)
    # Families: one per problem, whatever numbers its message holds (the degrees), listed
    # by what its layouts share and the values of the degree the problem is about.
    families: dict[str, tuple[str, str | None, list[dict[str, Any]]]] = {}
    floors: dict[int, list[tuple[int, Layout, int]]] = {}

    def drop(key: str, message: str, layout: Layout, degree: str | None) -> None:
        families.setdefault(key, (message, degree, []))[2].append(layout.describe())

    def degree_of(exc: ConfigError) -> str | None:
        from hyper_parallel.runtime.parallel_dims import PARALLELISM_FIELDS

        names = {f: d for d, f in PARALLELISM_FIELDS.items()}
        return {"dp_shard": "dp_shard"}.get(names.get(exc.path or ""), names.get(exc.path or ""))

    for layout in _layouts(world, facts):
        space.considered += 1
        twin = same_run(layout)
        if twin is not None:
            drop("same run", SAME_RUN, layout, "dp_replicate")
            continue
        points = _batch_points(layout, gbs, base.training.local_batch_size)
        probe = checked_view(base, Candidate(layout, points[-1][0], points[-1][1], "full"))
        try:
            engine_check(probe, world, facts, training=False)
        except ConfigError as exc:
            drop(re.sub(r"\d+", "#", str(exc)), str(exc), layout, degree_of(exc))
            continue
        wide = outside_node(layout, world, gpus_per_node)
        if wide:
            axis = "tp" if wide.startswith("its tensor") else "ep"
            drop(f"outside a node: {axis} {getattr(layout, axis)}", wide, layout, axis)
            continue
        survivors = []
        problem: ConfigError | None = None
        for lbs, m in points:
            for mode in AC_MODES:
                candidate = Candidate(layout, lbs, m, mode)
                try:
                    engine_check(checked_view(base, candidate), world, facts)
                except ConfigError as exc:
                    problem = problem or exc
                    continue
                survivors.append(candidate)
        if not survivors:
            assert problem is not None
            drop(re.sub(r"\d+", "#", str(problem)), str(problem), layout, degree_of(problem))
            continue
        floor, rank = memory_floor(layout, probe, facts, world)
        if floor > gpu.memory_bytes:
            floors.setdefault(layout.dp_replicate, []).append((floor, layout, rank))
            continue
        space.floors[layout] = floor
        space.layouts[layout] = survivors
    for replicas, found in sorted(floors.items()):
        floor, layout, rank = min(found, key=lambda item: item[0])
        where = (f" (pipeline rank {rank} of {label(layout.describe())})" if layout.pp > 1
                 else "")
        message = (f"needs at least {floor / GIB:.1f} GiB a rank{where} before any activation: "
                   f"its share of the {facts.parameters:,} parameters' bytes with their "
                   "gradients and optimizer state over the ranks that split them (the world "
                   "over the pipeline degree and HSDP's copies), and preflight's allowances; "
                   f"the {gpu.name} has {gpu.memory_bytes / GIB:.1f} GiB")
        families[f"floor {replicas}"] = (message, "dp_replicate" if replicas > 1 else None,
                                         [item[1].describe() for item in found])
    for message, degree, members in families.values():
        family = common(members, degree)
        many = (f" ({len(members)} layouts, e.g. {label(members[0])})"
                if len(members) > 1 else "")
        space.dropped.append(Dropped(family, f"{label(family)}{many}: {message}"))
    return space


def common(members: list[dict[str, Any]], degree: str | None = None) -> dict[str, Any]:
    """What a family of layouts is: the degrees and modes its members share but a shared 1
    (no parallelism is not what a family is about), and ``degree`` (the one its problem is
    about): its value, or the sorted list of its members' values."""
    shared = {k: v for k, v in members[0].items()
              if all(m.get(k) == v for m in members) and not (k in DEGREES and v == 1)}
    if degree is not None and degree not in shared:
        values = sorted({m[degree] for m in members if degree in m})
        shared = {degree: values[0] if len(values) == 1 else values, **shared}
    return shared


__all__ = ["AC_MODES", "DEGREES", "Candidate", "Dropped", "Layout", "ModelFacts", "Space",
           "apply", "build_space", "candidate_of", "common", "copy_config", "divisors",
           "engine_check", "factorizations", "group_ranks", "held_floor", "label", "memory_floor",
           "model_facts", "optimizer_bytes_per_element", "outside_node", "same_run"]
