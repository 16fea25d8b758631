"""Pipeline parallelism of a decoder LM: stages cut at layer boundaries, and their schedule.

The spec's ``pipelining_fn`` (:func:`pipeline_decoder_lm`) turns one model, built whole on
``meta``, into the stages this rank runs, parallelizes each with the spec's ``parallelize_fn``
and builds the ``torch.distributed.pipelining`` schedule over the ``pp`` mesh axis.

**Units and stages.** A model names its pipeline units in order (``pipeline_units()``: for
Qwen3.5 ``model.embed_tokens``, ``model.layers.0`` ... ``model.layers.{N-1}``, ``model.norm``,
``lm_head``). A stage is a deep copy of the model that keeps a contiguous run of them: the first
stage the embedding, the last the final norm and the head; the other modules are removed
(``None``) and the decoder's ``forward`` skips what is absent. Kept layers keep their index
(:class:`StageLayers`), so every parameter has the name it has in the whole model: checkpoints
and Hugging Face exports do not depend on the layout.

**Which layers where.** In order of precedence: ``module_fqns_per_model_part`` (the units of
every stage, as torchtitan spells them), ``pipeline_parallel_layer_split`` (decoder layers per
stage, the legacy ``pp_layer_split``), ``pipeline_parallel_layers_per_stage`` (fixes the number
of stages), else ``pipeline_parallel_degree x stages per rank`` stages balanced as torchtitan
balances them: the embedding counts as ``first_stage_less_layers`` layers and the head as
``last_stage_less_layers``, and the first stages take the remainder (:func:`split_layers`).
Rank ``r`` of the ``pp`` axis holds stages ``r, r + pp, r + 2 pp, ...`` (looped placement).

**Initial weights.** The parts are materialized and initialized through the whole model
(``init_weights_of_parts``): the draws walk the whole model in order and each tensor another
rank holds is drawn and discarded, so a stage's weights are those the whole model would get, on
every layout.

**Tied embeddings.** When the head shares the embedding's weight and the two are on different
stages, each holds a copy; both start from one draw, and after every backward their gradients
are summed between the ranks that hold them (:class:`TiedWeights`), so the copies stay equal and
the update is that of the one shared weight. The gradient norm counts the weight once.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

from hyper_parallel.platform.collectives import all_reduce_sum
from hyper_parallel.utils.choices import (
    PIPELINE_SCHEDULES,
    REFUSED_PIPELINE_SCHEDULES,
    SINGLE_STAGE_SCHEDULES,
)
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.module_names import strip_wrapper_prefixes
from hyper_parallel.utils.suggest import did_you_mean

logger = logging.getLogger(__name__)

__all__ = [
    "Pipeline",
    "StageLayers",
    "TiedWeights",
    "check_schedule_name",
    "cut_stage",
    "pipeline_decoder_lm",
    "plan_stages",
    "split_layers",
    "stage_position",
    "stages_of_rank",
]

_FIELD = "parallelism."

#: The attribute of a stage module (set before the spec's ``parallelize_fn`` runs on it):
#: ``(stage index, number of stages)``, for settings given per stage
#: (``activation_checkpoint.num_layers``).
STAGE_ATTR = "pipeline_stage"


def stage_position(module: nn.Module) -> tuple[int, int]:
    """``(stage index, number of stages)`` of a pipeline stage module; ``(0, 1)`` for a whole
    model (one stage)."""
    return getattr(module, STAGE_ATTR, (0, 1))


# ====================================================================== the plan (no torch work)
def check_schedule_name(name: str) -> str:
    """The schedule ``name`` as :data:`PIPELINE_SCHEDULES` spells it (case-insensitive), or a
    ``ConfigError`` naming the reason (torch's zero-bubble schedules) or the valid names."""
    by_lower = {s.lower(): s for s in PIPELINE_SCHEDULES}
    if str(name).lower() in by_lower:
        return by_lower[str(name).lower()]
    refused = {k.lower(): (k, v) for k, v in REFUSED_PIPELINE_SCHEDULES.items()}
    path = _FIELD + "pipeline_parallel_schedule"
    if str(name).lower() in refused:
        spelled, reason = refused[str(name).lower()]
        raise ConfigError(f"{spelled!r} is not supported: {reason}", path=path)
    raise ConfigError(
        f"{name!r} is not a pipeline schedule{did_you_mean(str(name), PIPELINE_SCHEDULES)}; "
        f"choose one of: {', '.join(PIPELINE_SCHEDULES)}",
        path=path,
    )


def split_layers(
    num_layers: int, num_stages: int, *, first_less: int = 1, last_less: int = 1
) -> list[int]:
    """Decoder layers per stage, torchtitan's balance: the embedding weighs ``first_less``
    layers and the head ``last_less``; the ``num_layers + first_less + last_less`` units are
    spread evenly and the first stages take the remainder.

    >>> split_layers(8, 2)            # 10 units: 5 + 5, minus the embedding / the head
    [4, 4]
    >>> split_layers(4, 4, first_less=0, last_less=0)
    [1, 1, 1, 1]
    """
    if num_stages == 1:
        return [num_layers]
    effective = num_layers + first_less + last_less
    per, extra = divmod(effective, num_stages)
    if per == 0:
        raise ConfigError(
            f"{num_stages} stages for {num_layers} decoder layers (+{first_less} for the "
            f"embedding, +{last_less} for the head) leave some stage empty; use fewer stages",
            path=_FIELD + "pipeline_parallel_degree",
        )
    counts = [per + (1 if i < extra else 0) for i in range(num_stages)]
    for index, less, what in ((0, first_less, "first"), (-1, last_less, "last")):
        if less > counts[index]:
            raise ConfigError(
                f"{less} is more than the {counts[index]} layers' worth the {what} stage holds "
                f"with {num_stages} stages of {num_layers} layers; lower it",
                path=_FIELD + f"pipeline_parallel_{what}_stage_less_layers",
            )
    counts[0] -= first_less
    counts[-1] -= last_less
    return counts


def stages_of_rank(pp_rank: int, pp: int, num_stages: int) -> list[int]:
    """The stages rank ``pp_rank`` of ``pp`` holds: ``pp_rank, pp_rank + pp, ...`` (looped)."""
    return list(range(pp_rank, num_stages, pp))


def _layer_counts_of_fqns(fqns_per_part: Sequence[Sequence[str]], units: Sequence[str]) -> None:
    """``module_fqns_per_model_part`` must name every unit exactly once, in model order."""
    path = _FIELD + "module_fqns_per_model_part"
    flat = [f for part in fqns_per_part for f in part]
    unknown = [f for f in flat if f not in units]
    if unknown:
        raise ConfigError(
            f"names {unknown[:3]} that are not pipeline units of this model"
            f"{did_you_mean(unknown[0], units)} (its units: {units[0]}, {units[1]}, ..., "
            f"{units[-1]})",
            path=path,
        )
    if sorted(flat, key=units.index) != list(units) or flat != sorted(flat, key=units.index):
        missing = [u for u in units if u not in flat]
        raise ConfigError(
            "must name every unit of the model exactly once, in model order"
            + (f" (missing: {missing[:3]})" if missing else " (a unit is repeated or out of order)"),
            path=path,
        )
    empty = [i for i, part in enumerate(fqns_per_part) if not part]
    if empty:
        raise ConfigError(f"model part {empty[0]} is empty", path=path)


def plan_stages(
    units: Sequence[str],
    num_layers: int,
    parallelism: Any,
) -> list[list[str]]:
    """The units of every stage, in stage order, from the ``parallelism`` section (see the
    module docstring for the order of precedence)."""
    pp = parallelism.pipeline_parallel_degree
    schedule = check_schedule_name(parallelism.pipeline_parallel_schedule)
    single = schedule in SINGLE_STAGE_SCHEDULES
    explicit = parallelism.module_fqns_per_model_part
    split = parallelism.pipeline_parallel_layer_split
    per_stage = parallelism.pipeline_parallel_layers_per_stage
    stages_per_rank = parallelism.pipeline_parallel_stages_per_rank
    first_less = parallelism.pipeline_parallel_first_stage_less_layers
    last_less = parallelism.pipeline_parallel_last_stage_less_layers
    layers = [u for u in units if _is_layer(u)]
    head_units = [u for u in units[: units.index(layers[0])]] if layers else []
    tail_units = [u for u in units[units.index(layers[-1]) + 1:]] if layers else []
    if explicit is not None:
        parts = [list(p) for p in explicit]
        _layer_counts_of_fqns(parts, units)
        source = "module_fqns_per_model_part"
    else:
        if split is not None:
            counts = list(split)
            source = "pipeline_parallel_layer_split"
            if sum(counts) != num_layers:
                raise ConfigError(
                    f"{counts} sums to {sum(counts)} but the model has {num_layers} decoder "
                    "layers",
                    path=_FIELD + source,
                )
            if any(c < 1 for c in counts):
                raise ConfigError(
                    f"{counts}: every stage needs at least one decoder layer",
                    path=_FIELD + source,
                )
        else:
            if per_stage is not None:
                source = "pipeline_parallel_layers_per_stage"
                num_stages = math.ceil((num_layers + first_less + last_less) / per_stage)
            else:
                source = "pipeline_parallel_stages_per_rank"
                num_stages = pp * (stages_per_rank or (1 if single else 2))
            counts = split_layers(num_layers, num_stages, first_less=first_less,
                                  last_less=last_less)
        parts = []
        start = 0
        for count in counts:
            parts.append(layers[start:start + count])
            start += count
        parts[0] = head_units + parts[0]
        parts[-1] = parts[-1] + tail_units
    num_stages = len(parts)
    path = _FIELD + source
    if num_stages % pp:
        raise ConfigError(
            f"gives {num_stages} stages, not a multiple of "
            f"parallelism.pipeline_parallel_degree={pp} (every rank holds the same number)",
            path=path,
        )
    if single and num_stages != pp:
        raise ConfigError(
            f"gives {num_stages} stages over {pp} ranks, but the schedule {schedule} runs one "
            "stage per rank; use Interleaved1F1B or LoopedBFS for several",
            path=path,
        )
    if not single and num_stages < 2 * pp:
        raise ConfigError(
            f"gives {num_stages} stages over {pp} ranks, but the schedule {schedule} runs "
            "several stages per rank; use GPipe or 1F1B for one",
            path=path,
        )
    if stages_per_rank is not None and num_stages != pp * stages_per_rank:
        raise ConfigError(
            f"{stages_per_rank} contradicts the {num_stages} stages {source} gives over "
            f"{pp} ranks; leave it unset",
            path=_FIELD + "pipeline_parallel_stages_per_rank",
        )
    return parts


def _is_layer(unit: str) -> bool:
    head, _, index = unit.rpartition(".")
    return head.endswith("layers") and index.isdigit()


# ====================================================================== cutting a stage
class StageLayers(nn.ModuleList):
    """The decoder layers one stage keeps, under their indices in the whole model.

    A ``ModuleList`` by position (``layers[0]`` is the stage's first layer, iteration in order,
    ``layers[i] = wrapped`` replaces one), whose children are named by the *model's* layer
    index, so ``model.layers.5.mlp.up_proj.weight`` keeps its name on a stage that starts at
    layer 4. Nothing can be inserted or removed."""

    def __init__(self, layers: dict[int, nn.Module]) -> None:
        super().__init__()
        for index, layer in layers.items():
            self._modules[str(index)] = layer

    def _get_abs_string_index(self, idx: int) -> str:
        keys = list(self._modules)
        return keys[idx]  # an IndexError, as ModuleList's, when out of range

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a pipeline stage's layers are fixed; cut another stage instead")

    append = extend = insert = __delitem__ = __iadd__ = _refuse  # type: ignore[assignment]


def cut_stage(model: nn.Module, keep: Sequence[str]) -> nn.Module:
    """A deep copy of ``model`` holding only the pipeline units ``keep`` (the others ``None``;
    decoder layers in a :class:`StageLayers`). ``model`` is usually on ``meta``."""
    stage = copy.deepcopy(model)
    keep_set = set(keep)
    layer_lists: dict[str, dict[int, nn.Module]] = {}
    for unit in stage.pipeline_units():
        parent_name, _, attr = unit.rpartition(".")
        if _is_layer(unit):
            kept = layer_lists.setdefault(parent_name, {})
            if unit in keep_set:
                kept[int(attr)] = stage.get_submodule(unit)
        elif unit not in keep_set:
            setattr(stage.get_submodule(parent_name) if parent_name else stage, attr, None)
    for parent_name, kept in layer_lists.items():
        owner_name, _, attr = parent_name.rpartition(".")
        owner = stage.get_submodule(owner_name) if owner_name else stage
        setattr(owner, attr, StageLayers(kept))
    return stage


# ====================================================================== tied weights
@dataclass
class TiedWeights:
    """One weight held by two stages on different ranks (a tied embedding and head): the
    gradient of each copy becomes their sum after the backward, over ``group`` (the ranks
    holding a copy, in every pipeline)."""

    params: list[nn.Parameter]
    """This rank's copies (none on a rank that holds neither stage)."""
    group: Any
    counted: list[bool]
    """Whether each copy counts in the gradient norm (one copy of the weight does)."""

    def sum_grads(self) -> None:
        for param in self.params:
            grad = param.grad
            if grad is None:
                continue
            local = grad.to_local() if isinstance(grad, DTensor) else grad
            reduced = all_reduce_sum(local, self.group)
            if reduced is not local:  # the backend does not serve the gradient's device
                local.copy_(reduced)

    def uncounted(self) -> set[int]:
        return {id(p) for p, c in zip(self.params, self.counted) if not c}


def _tied_weights(
    reference: nn.Module, parts: list[nn.Module], parts_stages: list[int],
    stage_units: list[list[str]], world_mesh: Any,
) -> TiedWeights | None:
    """The :class:`TiedWeights` of ``reference``'s shared parameters whose names fall on
    different ranks' stages, or None. Every rank calls it (it creates the process groups)."""
    names_of: dict[int, list[str]] = {}
    for name, param in reference.named_parameters(remove_duplicate=False):
        names_of.setdefault(id(param), []).append(name)
    shared = [names for names in names_of.values() if len(names) > 1]
    if not shared:
        return None
    if len(shared) > 1:
        raise NotImplementedError(f"several tied weights {shared}; only one is supported")
    names = shared[0]
    units = reference.pipeline_units()
    owner_unit = [next(u for u in units if n.startswith(u + ".")) for n in names]
    stage_of_unit = {}
    for stage_index, held in enumerate(stage_units):
        for u in held:
            stage_of_unit[u] = stage_index
    stages = [stage_of_unit[u] for u in owner_unit]
    pp = world_mesh["pp"].size()
    ranks_in_pipeline = sorted({s % pp for s in stages})
    if len(ranks_in_pipeline) == 1:
        return None  # both copies on one rank: parts on one rank share the module objects
    # Every pipeline (one per combination of the other mesh coordinates) gets its own group;
    # every rank creates every group, in the same order.
    groups = _pipeline_rank_lists(world_mesh)
    my_group = None
    for ranks in groups:
        members = [ranks[i] for i in ranks_in_pipeline]
        group = dist.new_group(members)
        if dist.get_rank() in members:
            my_group = group
    params, counted = [], []
    for part, stage in zip(parts, parts_stages):
        live = {strip_wrapper_prefixes(n): p for n, p in part.named_parameters()}
        for name, s in zip(names, stages):
            if s == stage and name in live:
                params.append(live[name])
                counted.append(s == stages[0])
    return TiedWeights(params=params, group=my_group, counted=counted)


def _pipeline_rank_lists(world_mesh: Any) -> list[list[int]]:
    """The global ranks of every pipeline of the job (each a row along ``pp``)."""
    full = world_mesh.mesh
    pp_dim = list(world_mesh.mesh_dim_names).index("pp")
    return full.movedim(pp_dim, -1).reshape(-1, full.shape[pp_dim]).tolist()


#: The method of a module that keeps statistics of its forwards (the mixture-of-experts
#: block's tokens per expert, which drive the expert-bias balancing) to start them afresh.
RESET_FORWARD_STATISTICS = "reset_tokens_per_expert"


def _forget_the_shape_inference_forward(part: nn.Module) -> None:
    """torch's schedule runs every stage once on placeholder inputs before its first
    micro-batch, to learn the activation shapes; what that forward counted must not reach the
    first optimizer step, so the statistics are reset after it (a one-shot forward hook)."""

    def after_first_forward(module: nn.Module, args: Any, output: Any) -> None:
        handle.remove()
        for sub in module.modules():
            reset = getattr(sub, RESET_FORWARD_STATISTICS, None)
            if reset is not None:
                reset()

    handle = part.register_forward_hook(after_first_forward)


# ====================================================================== the pipeline
@dataclass
class Pipeline:
    """What the engine runs under pipeline parallelism: the schedule and this rank's stages."""

    schedule: Any
    parts: list[nn.Module]
    """This rank's stage modules, in stage order (the engine's model parts)."""
    stage_indices: list[int]
    num_stages: int
    num_microbatches: int
    has_first_stage: bool
    has_last_stage: bool
    group: Any
    """The ``pp`` process group (the loss and the gradient norm are reduced over it)."""
    tied: TiedWeights | None = None
    schedule_name: str = ""
    stage_units: list[list[str]] = field(default_factory=list)

    def shapes_inferred(self) -> bool:
        """Whether the schedule has learnt its stages' gradient shapes: its first training
        step runs the last stage's loss once on placeholder inputs first (torch's metadata
        inference; read from the schedule, which has no public accessor)."""
        for name in ("_stage_backward_initialized", "_stages_backward_initialized"):
            if hasattr(self.schedule, name):
                return bool(getattr(self.schedule, name))
        raise RuntimeError(
            f"{type(self.schedule).__name__} does not say whether it has inferred its shapes; "
            "this torch version's pipelining schedules are not supported"
        )

    def grad_norm_exclusions(self) -> set[int]:
        """``id`` of the parameters the gradient norm leaves out (a tied weight's second
        copy: the weight counts once)."""
        return set() if self.tied is None else self.tied.uncounted()


def pipeline_decoder_lm(
    model: nn.Module,
    parallel_dims: Any,
    *,
    device: torch.device,
    parallelize_fn: Callable[..., nn.Module],
    loss_fn: Callable[..., torch.Tensor],
    num_microbatches: int,
    parallelism: Any,
    **parallelize_sections: Any,
) -> Pipeline:
    """Cut ``model`` (whole, on ``meta``) into this rank's stages, parallelize each with
    ``parallelize_fn(part, parallel_dims, parallelism=..., **parallelize_sections)``,
    materialize and initialize them through the whole model, and build the schedule with
    ``loss_fn`` (called on the last stage as ``loss_fn(logits, labels)`` per micro-batch, its
    result backpropagated as it is: ``scale_grads=False``)."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import get_schedule_class

    units = list(model.pipeline_units())
    num_layers = sum(1 for u in units if _is_layer(u))
    stage_units = plan_stages(units, num_layers, parallelism)
    pp_mesh = parallel_dims.get_mesh("pp")
    pp, pp_rank = pp_mesh.size(), pp_mesh.get_local_rank()
    num_stages = len(stage_units)
    mine = stages_of_rank(pp_rank, pp, num_stages)
    schedule_name = check_schedule_name(parallelism.pipeline_parallel_schedule)
    parts = []
    for stage_index in mine:
        part = cut_stage(model, stage_units[stage_index])
        setattr(part, STAGE_ATTR, (stage_index, num_stages))
        part = parallelize_fn(part, parallel_dims, parallelism=parallelism,
                              **parallelize_sections)
        parts.append(part)
    if next(model.parameters()).is_meta:
        for part in parts:
            part.to_empty(device=device)
        with torch.no_grad():
            model.init_weights_of_parts(parts, buffer_device=device)
    # Both copies of a tied weight start equal: one draw of the whole model's init, or one
    # deep copy of a model built on a real device.
    tied = _tied_weights(model, parts, mine, stage_units, parallel_dims.world_mesh)
    for part in parts:
        _forget_the_shape_inference_forward(part)
    group = pp_mesh.get_group()
    stages = [
        PipelineStage(part, stage_index, num_stages, device, group=group)
        for part, stage_index in zip(parts, mine)
    ]
    schedule_class = get_schedule_class(schedule_name)
    single = schedule_name in SINGLE_STAGE_SCHEDULES
    if schedule_name != "GPipe" and num_microbatches < pp:
        raise ConfigError(
            f"{num_microbatches} micro-batches for {pp} pipeline ranks: the {schedule_name} "
            f"schedule needs at least one per rank; use >= {pp} (GPipe runs with fewer)",
            path=_FIELD + "num_pp_microbatches",
        )
    try:
        schedule = schedule_class(
            stages[0] if single else stages,
            n_microbatches=num_microbatches,
            loss_fn=loss_fn,
            scale_grads=False,
        )
    except ValueError as exc:  # torch's own rules on micro-batches and stages
        raise ConfigError(
            f"{num_microbatches} micro-batches with the {schedule_name} schedule over "
            f"{num_stages} stages: {exc}",
            path=_FIELD + "num_pp_microbatches",
        ) from None
    if num_microbatches < num_stages and pp_rank == 0:
        logger.warning(
            "%d pipeline micro-batches for %d stages: the pipeline is never full "
            "(parallelism.num_pp_microbatches >= %d fills it)",
            num_microbatches, num_stages, num_stages,
        )
    logger.info(
        "pipeline: %s, %d stages over pp=%d, %d micro-batches; this rank holds stages %s",
        schedule_name, num_stages, pp, num_microbatches, mine,
    )
    return Pipeline(
        schedule=schedule,
        parts=parts,
        stage_indices=mine,
        num_stages=num_stages,
        num_microbatches=num_microbatches,
        has_first_stage=0 in mine,
        has_last_stage=num_stages - 1 in mine,
        group=group,
        tied=tied,
        schedule_name=schedule_name,
        stage_units=stage_units,
    )
