"""The search: prune the space, preflight the survivors in order of promise, price, rank.

Preflight is the memory verdict and the source of each step's work, and it is the expensive
part (seconds to tens of seconds a simulation; a pipeline's stages step their whole depth), so
the search bounds it:

* **Promise.** Every surviving candidate gets an *estimate* (:func:`estimate`): its compute at
  the profile's matmul rate, the recomputation its checkpointing adds, the pipeline's bubble,
  and the collectives its layout implies (FSDP's gathers and reduce-scatters beyond what the
  compute hides, the tensor-, expert- and context-parallel exchanges of every layer as the
  step issues them: context parallelism's by its modes, with state passing's longer
  recurrence, expert parallelism's on the busiest rank), priced on the links their groups
  cross. It orders the preflights and nothing else: the figures the plan prints are the
  preflighted step's (:func:`~hyper_parallel.plan.timing.predict`).
* **Rounds.** Each round preflights the most promising undecided candidates at once
  (``preflight_many``: one simulation per distinct configuration, on every core), until the
  budget of preflights is spent or nothing is left undecided.
* **Monotonicity** decides candidates without preflighting them. Within one layout a
  micro-batch of more rows and less recomputation never needs less memory: when a candidate
  does not fit, every one with at least its rows and at most its recomputation does not
  either. And one that fits is at least as fast as those of its layout with fewer rows a
  micro-batch (more accumulation steps: more FSDP gathers, smaller matmuls; not under a
  pipeline, whose bubble shrinks with more micro-batches) and more recomputation: they are
  dominated.

What the budget leaves undecided is listed with the reason and its estimate (``--budget``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hyper_parallel.plan.space import (
    Candidate,
    Dropped,
    Layout,
    ModelFacts,
    apply,
    build_space,
    candidate_of,
    engine_check,
    group_ranks,
    label,
    model_facts,
)
from hyper_parallel.utils.errors import ConfigError

#: Preflights a plan runs at most by default (``--budget``), in the cost of the model's
#: cheapest preflight (:func:`weight`), besides one pipeline's (which steps its whole depth,
#: 3 to 5 of them; without it no pipeline family could ever be checked): the recipe's own
#: layout and the best of each family that might be best, a few rounds on a 2-core machine.
DEFAULT_BUDGET = 4
#: By default the search preflights only candidates whose calibrated estimate is within this
#: share of the best step found so far (:class:`Promise`): those that might be best.
MIGHT_BE_BEST = 0.25
#: The extra forward a checkpointing mode recomputes, as a share of a forward+backward
#: (selective recomputes the element-wise operators between the saved matmul outputs).
RECOMPUTE = {"none": 0.0, "selective": 0.1 / 3, "full": 1 / 3}


@dataclass
class Evaluated:
    """A preflighted candidate: its verdict, its memory and its predicted step."""

    candidate: Candidate
    config: Any
    report: Any = None
    fits: bool = False
    peak_bytes: int = 0
    prediction: Any = None
    tokens_per_second_per_gpu: float | None = None
    mfu: float | None = None
    estimate: float = 0.0
    recipe: bool = False
    """The recipe's own layout."""


@dataclass
class PlanResult:
    world: int
    nodes: int
    gpus_per_node: int
    gpu: Any
    hardware: Any
    global_batch: int
    seq_len: int
    evaluated: list[Evaluated] = field(default_factory=list)
    """Best first: those that fit by predicted step time, then the others by memory."""
    dropped: list[Dropped] = field(default_factory=list)
    preflights: int = 0
    budget: int = DEFAULT_BUDGET
    considered: int = 0
    seconds: float = 0.0

    @property
    def fits(self) -> bool:
        return any(e.fits for e in self.evaluated)


# ----------------------------------------------------------------------- promise
def _seconds(kind: str, nbytes: float, group: tuple[int, ...], count: float,
             gpus_per_node: int, hardware: Any) -> float:
    from hyper_parallel.plan.timing import collective_seconds
    from hyper_parallel.plan.work import Collective

    if len(group) < 2 or count <= 0:
        return 0.0
    return collective_seconds(Collective(kind, int(nbytes), group, 1), gpus_per_node,
                              hardware) * count


def estimate(candidate: Candidate, base: Any, facts: ModelFacts, world: int,
             gpus_per_node: int, hardware: Any) -> float:
    """A step time to order preflights by (see the module docstring); seconds."""
    return sum(estimate_parts(candidate, base, facts, world, gpus_per_node, hardware))


def estimate_parts(candidate: Candidate, base: Any, facts: ModelFacts, world: int,
                   gpus_per_node: int, hardware: Any) -> tuple[float, float, float]:
    """``(compute, bubble, exposed communication)`` of :func:`estimate`, in seconds: the
    compute is the model's FLOPs at the profile's matmul rate with the recomputation, the
    bubble a share of it (:class:`Promise` scales both by what a preflight measured)."""
    lay = candidate.layout
    t = base.training
    rows, micro = _rows_and_micro_batches(candidate, base)
    compute = facts.flops_per_token * t.global_batch_size * t.seq_len / world
    compute = compute / hardware.matmul_flops * (1 + RECOMPUTE[candidate.activation_checkpoint])
    first = {axis: (groups[0] if (groups := group_ranks(lay, world, axis)) else ())
             for axis in ("dp_shard", "dp_replicate", "tp", "ep", "cp", "pp")}

    def cost(kind: str, nbytes: float, axis: str, count: float) -> float:
        return _seconds(kind, nbytes, first[axis], count, gpus_per_node, hardware)

    compute += _state_passing_seconds(candidate, base, facts, hardware)
    bubble = 0.0
    if lay.pp > 1:
        bubble = compute * (lay.pp - 1) / (lay.pp_stages_per_rank * micro)
    mc = facts.model_config
    layers = facts.num_layers / lay.pp
    # FSDP: each unit (a layer; the embedding, the head) gathered in bf16 per micro-batch's
    # forward (and backward, resharded after the forward), its gradients reduce-scattered in
    # fp32; what the compute does not hide is exposed. HSDP all-reduces the shards once.
    params = facts.parameters / lay.pp / max(lay.tp, lay.ep if facts.num_experts else 1)
    units = layers + 2
    gathers = (2 if base.parallelism.reshard_after_forward else 1) * micro
    reduces = 1 if base.parallelism.fsdp_defer_gradient_sync else micro
    fsdp = (cost("all_gather", 2 * params / units, "dp_shard", units * gathers)
            + cost("reduce_scatter", 4 * params / units, "dp_shard", units * reduces))
    exposed = max(0.0, fsdp - hardware.overlap * compute)
    exposed += cost("all_reduce", 4 * params / max(1, lay.dp_shard), "dp_replicate", 1)
    # Every layer's exchanges of one micro-batch's activations, forward and backward.
    tokens = rows * t.seq_len / micro / lay.cp / lay.ep
    activation = tokens * mc.hidden_size * 2
    for axis, exchanges in (("tp", tensor_parallel_exchanges), ("ep", expert_parallel_exchanges),
                            ("cp", context_parallel_exchanges)):
        exposed += sum(cost(kind, nbytes, axis, count)
                       for kind, nbytes, count in exchanges(candidate, base, facts))
    # The pipeline's activations and their gradients, once per micro-batch and stage.
    exposed += _seconds("send_recv", activation, first["pp"][:2], 2 * micro *
                        lay.pp_stages_per_rank, gpus_per_node, hardware)
    return compute, bubble, exposed


def _rows_and_micro_batches(candidate: Candidate, base: Any) -> tuple[int, int]:
    """A data-parallel rank's rows a step and the micro-batches it steps them in."""
    lay = candidate.layout
    rows = base.training.global_batch_size // (lay.dp_replicate * lay.dp_shard)
    micro = candidate.pp_microbatches if lay.pp > 1 else rows // candidate.local_batch_size
    return rows, micro


def _layers_by_kind(facts: ModelFacts, pp: int) -> tuple[float, float]:
    """A pipeline rank's share of the model's ``(full attention, Gated DeltaNet)`` layers."""
    kinds = list(getattr(facts.model_config, "layer_types", None) or ())
    linear = kinds.count("linear_attention") / pp
    return facts.num_layers / pp - linear, linear


def _activation_bytes(base: Any) -> int:
    """Bytes of an activation element in the run's compute dtype."""
    return ACTIVATION_BYTES[getattr(base.training, "mixed_precision_param", None) or "float32"]


def tensor_parallel_exchanges(candidate: Candidate, base: Any, facts: ModelFacts
                              ) -> list[tuple[str, float, float]]:
    """The collectives tensor parallelism issues in a rank's step
    (``models/qwen3_5/parallelize.py``'s plan, no sequence parallelism), from the model's
    sizes: ``[(kind, bytes a call, calls)]``, each on a micro-batch's activations (its tokens
    x ``hidden_size`` in the compute dtype):

    * the forward all-reduces the output of every row-parallel linear (a layer's mixer and
      feed-forward: 2 a layer) and the vocabulary-parallel embedding's;
    * the backward all-reduces the input gradient of every column-parallel linear (a gated
      attention layer's q / k / v and the feed-forward's gate / up: 5; a Gated DeltaNet's six
      input projections and the feed-forward's two: 8) and the head's;
    * full checkpointing recomputes a layer up to the last tensor its backward reads, which
      issues the mixer's all-reduce again (1 a layer; the feed-forward's output is not read);
    * the head's logits are all-gathered (``tokens x vocab``).

    The replicated norms' gradient reductions (a few KiB) are left out. A pipeline rank is
    priced as if it held the embedding and the head."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    from hyper_parallel.models.qwen3_5.parallelize import (
        ATTENTION_PLAN,
        GATED_DELTANET_PLAN,
        MLP_PLAN,
    )

    lay = candidate.layout
    if lay.tp == 1:
        return []
    mc = facts.model_config
    rows, micro = _rows_and_micro_batches(candidate, base)
    full, linear = _layers_by_kind(facts, lay.pp)
    size = _activation_bytes(base)
    tokens = rows * base.training.seq_len / micro / lay.cp

    def linears(style: type) -> float:
        """The rank's linears of ``style`` (each issues one all-reduce). Every Qwen3.5
        feed-forward, the dense one and a mixture's shared expert, is a column-then-row pair
        (``MLP_PLAN``)."""
        def of(plan: dict) -> int:
            return sum(1 for s in plan.values() if s is style)

        return (of(ATTENTION_PLAN) * full + of(GATED_DELTANET_PLAN) * linear
                + of(MLP_PLAN) * (full + linear))

    forward = linears(RowwiseParallel) + 1  # and the embedding's
    backward = linears(ColwiseParallel) + 1  # and the head's
    if candidate.activation_checkpoint == "full":
        backward += full + linear
    return [("all_reduce", tokens * mc.hidden_size * size, (forward + backward) * micro),
            ("all_gather", tokens * mc.vocab_size * size, micro)]


def expert_parallel_exchanges(candidate: Candidate, base: Any, facts: ModelFacts
                              ) -> list[tuple[str, float, float]]:
    """The all-to-alls expert parallelism issues in a rank's step
    (``models/qwen3_5_moe/expert_parallel.py``), from the model's sizes, on the busiest rank
    as preflight measures it (it receives :data:`~hyper_parallel.preflight.run.
    DEFAULT_IMBALANCE` times its share of the routed rows): ``[(kind, bytes a call, calls)]``.
    Each mixture-of-experts layer, each micro-batch:

    * the forward exchanges the per-expert row counts (``num_experts`` int64), dispatches the
      rank's routed rows (its tokens x ``num_experts_per_tok``, ``hidden_size`` wide, in the
      compute dtype) and combines the experts' outputs back (the rows it received);
    * the backward sends the gradients the other way: the combined rows' (its own routed rows)
      and the dispatched ones' (the rows it received);
    * full checkpointing's recomputation issues the forward's three again; selective
      checkpointing keeps the token all-to-alls' outputs, and exchanges the counts again."""
    from hyper_parallel.preflight.run import DEFAULT_IMBALANCE

    lay = candidate.layout
    if lay.ep == 1 or not facts.num_experts:
        return []
    mc = facts.model_config
    rows, micro = _rows_and_micro_batches(candidate, base)
    # Each expert-parallel rank trains on its 1/ep of a data-parallel rank's rows.
    tokens = rows / micro / lay.ep * base.training.seq_len / lay.cp
    routed = round(tokens * mc.num_experts_per_tok)
    received = round(routed * DEFAULT_IMBALANCE)
    width = mc.hidden_size * _activation_bytes(base)
    layers = facts.num_layers / lay.pp
    again = 1 if candidate.activation_checkpoint == "full" else 0  # the rows, recomputed
    counts = 2 if candidate.activation_checkpoint in ("full", "selective") else 1
    return [("all_to_all", facts.num_experts * 8, counts * layers * micro),
            ("all_to_all", routed * width, (2 + again) * layers * micro),
            ("all_to_all", received * width, (2 + again) * layers * micro)]


def context_parallel_exchanges(candidate: Candidate, base: Any, facts: ModelFacts
                               ) -> list[tuple[str, float, float]]:
    """The collectives context parallelism issues in a rank's step, by its modes
    (``models/qwen3_5/context_parallel.py``), from the model's head counts and sizes:
    ``[(kind, bytes a call, calls)]``.

    * attention, ``ulysses``: an all-to-all of the queries, keys and values to
      whole-sequence heads and one of the outputs back, and their gradients' in the backward;
      ``all_gather``: the keys and the values gathered, one call each (the 2 to 4 key/value
      heads of Qwen3.5: far fewer bytes), their gradients reduce-scattered;
    * Gated DeltaNet, ``ulysses``: the same all-to-alls of the projected q / k / v / b / a
      and the outputs; ``p2p``: the shards' state maps all-gathered (``Dk x (Dv + Dk)`` fp32
      a head) and the short convolution's ``kernel - 1`` tokens before each shard, their
      gradients reduce-scattered;
    * activations move in the compute dtype (``training.mixed_precision_param``); full
      checkpointing issues each forward exchange again in the recomputation (selective keeps
      their outputs: ``models/qwen3_5/activation_checkpoint.py``)."""
    lay = candidate.layout
    if lay.cp == 1:
        return []
    mc = facts.model_config
    rows, micro = _rows_and_micro_batches(candidate, base)
    full, linear = _layers_by_kind(facts, lay.pp)
    tokens = rows * base.training.seq_len / micro / lay.cp  # a micro-batch's, on this rank
    tp, fp32 = lay.tp, 4
    size = _activation_bytes(base)
    forwards = 2 if candidate.activation_checkpoint == "full" else 1
    out: list[tuple[str, float, float]] = []
    if full:
        q = mc.num_attention_heads * mc.head_dim / tp
        kv = mc.num_key_value_heads * mc.head_dim / tp
        if lay.cp_attention == "ulysses":
            moved = tokens * (2 * q + 2 * kv) * size
            out.append(("all_to_all", moved / 2, 2 * (forwards + 1) * full * micro))
        else:
            gathered = lay.cp * tokens * kv * size
            out += [("all_gather", gathered, 2 * forwards * full * micro),
                    ("reduce_scatter", gathered, 2 * full * micro)]
    if linear:
        hk, hv = mc.linear_num_key_heads / tp, mc.linear_num_value_heads / tp
        dk, dv = mc.linear_key_head_dim, mc.linear_value_head_dim
        if lay.cp_linear == "ulysses":
            moved = tokens * (2 * hk * dk + 2 * hv * dv + 2 * hv) * size
            out.append(("all_to_all", moved / 2, 2 * (forwards + 1) * linear * micro))
        else:
            batch = lay.cp * rows / micro
            maps = batch * hv * dk * (dv + dk) * fp32
            halo = batch * (mc.linear_conv_kernel_dim - 1) * (2 * hk * dk + hv * dv) * size
            for nbytes in (maps, halo):
                out += [("all_gather", nbytes, forwards * linear * micro),
                        ("reduce_scatter", nbytes, linear * micro)]
    return out


def _state_passing_seconds(candidate: Candidate, base: Any, facts: ModelFacts,
                           hardware: Any) -> float:
    """What context parallelism's ``p2p`` state passing adds to a rank's compute: each rank
    runs the delta rule's recurrence on ``Dk`` more value columns (the identity that carries
    the incoming state), memory-bound work a FLOP count barely sees, priced as preflight counts
    the chunk loop (:func:`~hyper_parallel.plan.work.chunk_step_work`; the passes outside the
    loop are left out: a floor). 0 for every other layout."""
    from hyper_parallel.models.qwen3_5.delta_rule import DEFAULT_CHUNK_SIZE
    from hyper_parallel.plan.work import chunk_step_work

    lay = candidate.layout
    if lay.cp == 1 or lay.cp_linear != "p2p":
        return 0.0
    mc = facts.model_config
    _, linear = _layers_by_kind(facts, lay.pp)
    rows, _ = _rows_and_micro_batches(candidate, base)
    tokens = rows * base.training.seq_len / lay.cp  # the step's, on this rank
    heads = mc.linear_num_value_heads / lay.tp
    dk, dv, c = mc.linear_key_head_dim, mc.linear_value_head_dim, DEFAULT_CHUNK_SIZE
    wide, narrow = chunk_step_work(c, dk, dv + dk, 4), chunk_step_work(c, dk, dv, 4)
    # The forward, a backward of twice its work and the recomputed share, every chunk's.
    passes = 3 * (1 + RECOMPUTE[candidate.activation_checkpoint]) * tokens / c * heads * linear
    return passes * ((wide[0] - narrow[0]) / hardware.matmul_flops
                     + (wide[1] - narrow[1]) / hardware.memory_bytes_per_s)


def weight(config: Any, facts: ModelFacts) -> int:
    """What preflighting ``config`` costs, in preflights of the model's cheapest kind: a role
    whose depth preflight extrapolates steps one and two periods of layers; a pipeline's
    stages (and a model without a period) step every layer (``preflight.simulate``; a
    rank's alike stages step once, so a pipeline's weight is an upper bound)."""
    from hyper_parallel.preflight.simulate import layer_period

    depth = facts.num_layers
    period = layer_period(base_of_period(config), facts.model_config)
    if period is None or depth <= 2 * period:
        return 1
    stepped = 3 * period if layer_period(config, facts.model_config) is not None else depth
    return max(1, math.ceil(stepped / (3 * period)))


def base_of_period(config: Any) -> Any:
    """``config`` as a layout without a pipeline would run it, to read the model's period."""
    from types import SimpleNamespace

    return SimpleNamespace(parallelism=SimpleNamespace(pipeline_parallel_degree=1),
                           activation_checkpoint=SimpleNamespace(num_layers=None))


#: Bytes of an activation element, by the compute dtype (``training.mixed_precision_param``).
ACTIVATION_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: What a checkpointing mode keeps of a layer's activations, relative to none (ordering only:
#: selective keeps the matmul outputs, full each layer's input; Korthikanti et al. 2022).
KEPT = {"none": 1.0, "selective": 0.6, "full": 0.15}


def tokens_held(c: Candidate, global_batch: int, base: Any) -> float:
    """Tokens whose activations one rank holds at once (ordering only): a micro-batch's rows
    split over the expert-parallel ranks, the sequence over the context- and tensor-parallel
    ones; a pipeline keeps up to ``pp`` micro-batches of its stages in flight (all of them
    under GPipe and LoopedBFS)."""
    lay = c.layout
    seq = base.training.seq_len / (lay.cp * lay.tp)
    if lay.pp == 1:
        return c.local_batch_size / lay.ep * seq
    rows = global_batch / (lay.dp_replicate * lay.dp_shard) / c.pp_microbatches / lay.ep
    flight = (c.pp_microbatches if lay.pp_schedule in ("GPipe", "LoopedBFS")
              else min(c.pp_microbatches, lay.pp))
    return rows * seq * flight / lay.pp


# ----------------------------------------------------------------------- monotonicity
def _rows(c: Candidate, global_batch: int) -> float:
    """Rows of one micro-batch on a data-parallel rank (memory grows with them)."""
    lay = c.layout
    if lay.pp > 1:
        return global_batch / (lay.dp_replicate * lay.dp_shard) / c.pp_microbatches
    return c.local_batch_size


def _needs_more(a: Candidate, b: Candidate, gbs: int) -> bool:
    """Whether ``a`` needs at least the memory of ``b`` (same layout, more rows, less
    recomputation)."""
    return (a.layout == b.layout and _rows(a, gbs) >= _rows(b, gbs)
            and a.ac_level <= b.ac_level)


def _dominated(a: Candidate, b: Candidate, gbs: int) -> bool:
    """Whether ``a`` is at best as fast as ``b`` when ``b`` fits (see the module docstring)."""
    if a.layout != b.layout or a.ac_level < b.ac_level:
        return False
    if a.layout.pp > 1:
        return _rows(a, gbs) == _rows(b, gbs)
    return _rows(a, gbs) <= _rows(b, gbs)


# ----------------------------------------------------------------------- the search
def _peak(report: Any) -> int:
    return max((r.total_bytes for r in report.roles), default=0)


def _evaluate(item: Evaluated, result: Any, nodes: int, gpus_per_node: int,
              hardware: Any) -> ConfigError | None:
    """Fill ``item`` from its preflight ``result``; a configuration error is returned."""
    from hyper_parallel.plan.timing import mfu, predict, tokens_per_second_per_gpu

    if isinstance(result, ConfigError):
        return result
    item.report = result
    item.fits = result.fits
    item.peak_bytes = _peak(result)
    if result.problems or not result.roles:
        return None
    prediction = predict(item.config, result, nodes, gpus_per_node, hardware)
    item.prediction = prediction
    item.tokens_per_second_per_gpu = tokens_per_second_per_gpu(
        item.config, prediction, result.world_size)
    item.mfu = mfu(item.config, prediction, hardware)
    return None


def family(layout: Layout) -> tuple[str, ...]:
    """A layout's family: the model-parallel axes it uses (``tp``, ``pp``, ``cp``, ``ep``);
    data parallelism (FSDP, HSDP) fills the rest of the world in each."""
    return tuple(axis for axis in ("tp", "pp", "cp", "ep") if getattr(layout, axis) > 1)


def family_name(axes: tuple[str, ...]) -> str:
    return " x ".join(axes) + " family" if axes else "data-parallel family"


class Promise:
    """The ordering estimate of every candidate, calibrated by the preflights so far: a
    candidate's compute (and its bubble, a share of it) is its analytic figure
    (:func:`estimate_parts`) times what the nearest preflighted candidate's predicted
    compute was over its own analytic figure (the same layout, else the same family, else
    any; the same checkpointing first). The ratio carries what the FLOPs alone do not see
    (the memory-bound operators, the operators' host cost, the real recomputation): on the
    9B recipe the preflighted compute is about 3x the FLOPs at the matmul rate, which left
    the collectives deciding the order. The collectives stay analytic.

    **The recomputation, as measured.** :data:`RECOMPUTE` is a FLOP count (full checkpointing
    recomputes a third of a forward and backward), and the preflighted step's compute is
    mostly memory-bound work that does not follow it: on the 9B recipe FSDP 8's compute is
    8.6 % more with full checkpointing than with selective, where the FLOPs say 29 %. So a
    ratio taken from a candidate of one checkpointing mode mis-prices another's. Once two
    preflighted candidates differ in their checkpointing only, their computes' ratio gives the
    share of :data:`RECOMPUTE` the step really costs (:meth:`recompute_scale`), and every
    candidate's analytic compute counts its recomputation at that share."""

    def __init__(self, parts: dict[Candidate, tuple[float, float, float]]):
        self.parts = parts
        self.known: list[Evaluated] = []
        self.scale = 1.0
        # Each candidate's promise, until the next verdict changes them: a round's choice
        # asks for thousands of them, tens of times each.
        self._promises: dict[Candidate, float] = {}

    def learn(self, item: Evaluated) -> None:
        if item.prediction is not None and item.candidate in self.parts:
            self.known.append(item)
            self.scale = self.recompute_scale()
            self._promises.clear()

    def recompute_scale(self) -> float:
        """The share ``s`` of :data:`RECOMPUTE` the preflights measured: for each pair of
        preflighted candidates alike but for their checkpointing modes ``a`` and ``b``, the
        ``s`` with ``(1 + s R_a) / (1 + s R_b)`` the ratio of their predicted computes; their
        mean, within [0, 1]; 1 (the FLOP count) without such a pair."""
        scales = []
        for i, a in enumerate(self.known):
            for b in self.known[i + 1:]:
                ca, cb = a.candidate, b.candidate
                if (ca.activation_checkpoint == cb.activation_checkpoint
                        or replace(ca, activation_checkpoint="none")
                        != replace(cb, activation_checkpoint="none")
                        or b.prediction.compute <= 0):
                    continue
                r = a.prediction.compute / b.prediction.compute
                ra, rb = RECOMPUTE[ca.activation_checkpoint], RECOMPUTE[cb.activation_checkpoint]
                if ra != r * rb:
                    scales.append((r - 1) / (ra - r * rb))
        return min(1.0, max(0.0, sum(scales) / len(scales))) if scales else 1.0

    def _recomputed(self, c: Candidate) -> float:
        """What :meth:`recompute_scale` makes of ``c``'s analytic compute (1: unchanged)."""
        share = RECOMPUTE[c.activation_checkpoint]
        return (1 + self.scale * share) / (1 + share)

    def ratio(self, c: Candidate) -> float:
        if not self.known:
            return 1.0
        ref = min(self.known, key=lambda e: (
            e.candidate.layout != c.layout, family(e.candidate.layout) != family(c.layout),
            e.candidate.activation_checkpoint != c.activation_checkpoint, e.candidate))
        compute = self.parts[ref.candidate][0] * self._recomputed(ref.candidate)
        return ref.prediction.compute / compute if compute > 0 else 1.0

    def __call__(self, c: Candidate) -> float:
        promise = self._promises.get(c)
        if promise is None:
            compute, bubble, exposed = self.parts[c]
            promise = self._promises[c] = (self.ratio(c) * self._recomputed(c)
                                           * (compute + bubble) + exposed)
        return promise


def plan(base: Any, *, nodes: int, gpus_per_node: int, gpu: Any, hardware: Any,
         budget: int | None = None, workers: int | None = None,
         progress: Callable[[str], None] | None = None) -> PlanResult:
    """Plan ``base`` (a ``HyperTrainer.Config``) on ``nodes`` x ``gpus_per_node`` GPUs of
    ``gpu`` priced by ``hardware`` (see the module docstring). ``budget``: preflights at
    most, spent on the most promising candidates; None: the default search, which stops
    once no candidate left might be best (within :data:`MIGHT_BE_BEST` of the best step
    found), at most :data:`DEFAULT_BUDGET` and one pipeline's weight."""
    from hyper_parallel.preflight.many import preflight_many, start_workers
    from hyper_parallel.preflight.run import processes
    from hyper_parallel.preflight.simulate import simulation_key

    start = time.perf_counter()
    say = progress or (lambda text: None)
    if budget is not None and budget < 1:
        raise ConfigError(f"{budget}: the plan needs at least one preflight; give --budget >= 1",
                          path="--budget")
    selective = budget is None
    world = nodes * gpus_per_node
    workers = workers or processes()
    # The pool's imports (seconds) while the model's facts and the space are worked out; a
    # plan that ends before its first preflight stops them at exit rather than wait.
    start_workers(workers)
    facts = model_facts(base)
    space = build_space(base, world, gpus_per_node, gpu, facts)
    gbs = base.training.global_batch_size
    result = PlanResult(world, nodes, gpus_per_node, gpu, hardware, gbs,
                        base.training.seq_len, considered=space.considered)
    families = {family(lay) for lay in space.layouts}
    parts = {c: estimate_parts(c, base, facts, world, gpus_per_node, hardware)
             for c in space.candidates}
    undecided: set[Candidate] = set(space.candidates)
    decided: dict[Candidate, str] = {}  # candidate -> why it was not preflighted
    evaluated: dict[Candidate, Evaluated] = {}
    failed: dict[Candidate, ConfigError] = {}
    simulated: dict[str, Any] = {}  # simulation key -> its preflight (shared, exact)

    own = candidate_of(base, world)
    if own is not None:
        try:
            engine_check(apply(base, own), world, facts)
        except ConfigError:
            own = None
    if own is not None and own not in parts:
        parts[own] = estimate_parts(own, base, facts, world, gpus_per_node, hardware)
    promise = Promise(parts)

    # A candidate's weight follows from its pipeline degree and checkpointing alone: one
    # configuration built per pair, not one per candidate (thousands).
    by_kind: dict[tuple[int, str], int] = {}
    for c in parts:
        kind = (c.layout.pp, c.activation_checkpoint)
        if kind not in by_kind:
            by_kind[kind] = weight(apply(base, c), facts)
    weights = {c: by_kind[(c.layout.pp, c.activation_checkpoint)] for c in parts}
    pipeline = max((w for c, w in weights.items() if c.layout.pp > 1), default=0)
    cap = DEFAULT_BUDGET + pipeline if budget is None else budget
    result.budget = cap
    say(f"plan: {space.considered} layouts on {world} ranks, {len(space.layouts)} pass the "
        f"rules ({len(space.candidates)} candidates, {len(families)} families); preflighting "
        f"at most {cap}")

    def likely_fits(c: Candidate) -> bool:
        """Whether the preflights so far suggest ``c`` fits (ordering only): its layout's
        exact floor plus the activations of the preflighted candidate nearest to it, scaled
        by the tokens a rank holds at once and what its checkpointing keeps."""
        known = [e for e in evaluated.values() if e.report is not None and e.report.roles]
        if not known:
            return True
        def held(e: Evaluated) -> float:
            return max(r.memory.activations_bytes + r.memory.buffers_bytes
                       for r in e.report.roles) / tokens_held(e.candidate, gbs, base)
        ref = min(known, key=lambda e: (e.candidate.layout != c.layout,
                                        e.candidate.activation_checkpoint
                                        != c.activation_checkpoint))
        scale = KEPT[c.activation_checkpoint] / KEPT[ref.candidate.activation_checkpoint]
        need = (space.floors.get(c.layout, 0)
                + held(ref) * scale * tokens_held(c, gbs, base))
        return need <= gpu.memory_bytes

    def best_known() -> float | None:
        """The best predicted step of a preflighted candidate that fits (None: none yet)."""
        steps = [e.prediction.step_seconds for e in evaluated.values()
                 if e.fits and e.prediction is not None]
        return min(steps) if steps else None

    def bar() -> float:
        """What a candidate's estimate is held against: the best predicted step found, or
        the best estimate of a candidate that likely fits, whichever is lower (both in the
        calibrated estimate's terms once a preflight has calibrated it)."""
        hopes = [promise(c) for c in undecided if likely_fits(c)]
        known = best_known()
        return min([*hopes, *([known] if known is not None else [])], default=math.inf)

    def might_be_best(c: Candidate, against: float) -> bool:
        return promise(c) <= (1 + MIGHT_BE_BEST) * against

    def choose(n: int, room: int) -> list[Candidate]:
        picked: list[Candidate] = []
        if own is not None and own not in evaluated and own not in failed:
            picked.append(own)
        order = sorted(undecided, key=lambda c: (not likely_fits(c), promise(c), c))
        checked = {family(c.layout) for c in [*evaluated, *failed, *([own] if own else [])]}
        against = bar() if selective else math.inf
        blind = not evaluated and any(weights[o] == 1 for o in undecided)
        # After the most promising, the best of each family no preflight has checked, by the
        # family's promise; then the most promising. Before any verdict nothing says what fits: a family is
        # first tried with the most recomputation and the fewest rows a micro-batch (likely
        # to fit, and its activations then calibrate what the family's others likely need).
        best_of: dict[tuple[str, ...], Candidate] = {}
        for c in order:
            best_of.setdefault(family(c.layout), c)
        heads: dict[tuple[str, ...], Candidate] = {}
        for c in (sorted(order, key=lambda c: (-c.ac_level, _rows(c, gbs), promise(c), c))
                  if blind else order):
            heads.setdefault(family(c.layout), c)
        first = [c for f, c in heads.items() if f not in checked]
        # The round's most promising candidate leads (the best guess so far), then the
        # families not checked yet.
        for c in [*order[:1], *first, *order]:
            if len(picked) >= n:
                break
            # A family's first preflight stands for the family: it is tried when the
            # family's best might be best.
            hope = best_of[family(c.layout)] if c in first else c
            if c in picked or not might_be_best(hope, against):
                continue
            if blind and weights[c] > 1:
                continue  # a dear one waits for the first verdicts: does it likely fit?
            # Two of one layout that one's verdict may decide: only the more promising.
            if any(p.layout == c.layout and (_needs_more(p, c, gbs) or _needs_more(c, p, gbs))
                   for p in picked):
                continue
            if sum(weights[p] for p in picked) + weights[c] > room:
                continue  # too dear for what is left: a cheaper one may still fit in
            picked.append(c)
        return picked

    batch = max(1, workers)
    while result.preflights < cap:
        picked = choose(batch, cap - result.preflights)
        if not picked:
            break
        say(f"plan: preflighting {', '.join(label(c.describe(gbs)) for c in picked)}")
        configs = [apply(base, c) for c in picked]
        # One simulation per distinct simulation key, this round's and every earlier one's:
        # candidates whose configurations simulate the same run share its figures.
        keys = [simulation_key(config) for config in configs]
        fresh = {k: i for i, k in reversed(list(enumerate(keys))) if k not in simulated}
        jobs = sorted(fresh.values())
        outcomes = preflight_many([configs[i] for i in jobs], gpu, worlds=[world] * len(jobs),
                                  suggest=False, workers=workers, work=True, quiet=True)
        simulated.update({keys[i]: outcome for i, outcome in zip(jobs, outcomes)})
        read = sum(1 for outcome in outcomes if getattr(outcome, "roles", None)
                   and all(role.kept for role in outcome.roles))
        if read:
            say(f"plan: {read} of them read from earlier preflights of this code "
                "(HYPER_PARALLEL_PREFLIGHT_CACHE), not simulated again")
        result.preflights += sum(weights[picked[i]] for i in jobs)
        for c, config, key in zip(picked, configs, keys):
            undecided.discard(c)
            item = Evaluated(c, config, estimate=promise(c), recipe=(c == own))
            error = _evaluate(item, simulated[key], nodes, gpus_per_node, hardware)
            if error is not None:
                failed[c] = error
                continue
            evaluated[c] = item
            promise.learn(item)
            for other in list(undecided):
                if item.fits and _dominated(other, c, gbs):
                    decided[other] = (f"dominated by {label(c.describe(gbs))}, which fits: as "
                                      "many rows a micro-batch at most and no less "
                                      "recomputation is no faster")
                    undecided.discard(other)
                elif not item.fits and _needs_more(other, c, gbs):
                    decided[other] = (f"needs at least the memory of {label(c.describe(gbs))}, "
                                      f"which does not fit ({item.peak_bytes / 2**30:.1f} GiB)")
                    undecided.discard(other)
    fitting = sorted((e for e in evaluated.values() if e.fits and e.prediction is not None),
                     key=lambda e: (e.prediction.step_seconds, e.candidate))
    others = sorted((e for e in evaluated.values() if not (e.fits and e.prediction)),
                    key=lambda e: (not e.fits, e.peak_bytes, e.candidate))
    result.evaluated = fitting + others
    result.dropped = list(space.dropped)
    for c, error in sorted(failed.items()):
        result.dropped.append(Dropped(c.describe(gbs), f"{label(c.describe(gbs))}: {error}"))
    by_layout: dict[Layout, list[tuple[Candidate, str]]] = {}
    for c, why in decided.items():
        by_layout.setdefault(c.layout, []).append((c, why))
    for layout, items in sorted(by_layout.items()):
        for c, why in sorted(items):
            result.dropped.append(Dropped(c.describe(gbs), f"{label(c.describe(gbs))}: {why}"))
    left: dict[Layout, list[Candidate]] = {}
    for c in undecided:
        left.setdefault(c.layout, []).append(c)
    against = bar()
    # By promise, then by layout: ``undecided`` is a set (its order is the process's hash seed).
    for layout, items in sorted(left.items(),
                                key=lambda kv: (min(promise(c) for c in kv[1]), kv[0])):
        top = min(items, key=lambda c: (promise(c), c))
        head = (f"{label(layout.describe())}: not preflighted ({len(items)} candidate"
                f"{'s' if len(items) > 1 else ''}, the most promising "
                f"{label(top.describe(gbs))} estimated at {promise(top):.3g} s a step): ")
        if selective and not might_be_best(top, against):
            why = (f"more than {MIGHT_BE_BEST:.0%} slower than the best found ({against:.3g} "
                   "s: the best preflighted step, or estimate of a candidate that likely "
                   "fits), so not among those that might be best; --budget N preflights the N "
                   "most promising whatever their estimate")
        else:
            why = (f"the budget of {cap} preflights went to more promising ones; --budget "
                   "raises it")
        result.dropped.append(Dropped(layout.describe(), head + why))
    result.seconds = time.perf_counter() - start
    return result


__all__ = ["DEFAULT_BUDGET", "MIGHT_BE_BEST", "Evaluated", "PlanResult", "Promise",
           "context_parallel_exchanges", "estimate", "estimate_parts", "expert_parallel_exchanges",
           "family", "plan", "tensor_parallel_exchanges"]
