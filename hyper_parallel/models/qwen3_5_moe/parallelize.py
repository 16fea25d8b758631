"""Parallelisation of Qwen3.5 MoE: TP -> EP -> AC -> compile -> FSDP, from the config sections.

:func:`parallelize_qwen3_5_moe` is the spec's ``parallelize_fn``, the dense model's
(:func:`~hyper_parallel.models.qwen3_5.parallelize_v2.parallelize_qwen3_5_v2`: same sections,
same mixed precision, activation checkpointing and compile rules) with the experts placed:

* **Tensor parallelism** shards the mixers as for the dense model and the shared expert as a
  dense MLP (column- then row-wise). The router, the routed experts and the shared expert's gate
  are replicated over the TP ranks (``expert_tensor_parallel_degree`` is 1): the activations
  between blocks are replicated, so every TP rank routes the same tokens the same way.
* **Expert parallelism** (the mesh's ``ep`` axis) gives each EP rank ``num_experts / ep`` whole
  experts (``Shard(0)`` DTensors of the fused expert weights) and each MoE block an
  :class:`~.expert_parallel.AllToAllDispatcher`. The EP ranks load the same batch and train on
  their own rows of it (``ParallelDims.batch_split``), so the dense layers are data-parallel over
  ``ep`` too.
* **FSDP**: the dense parameters over every rank that trains on different rows
  (``dp_replicate`` x ``dp_shard`` x ``ep``; HSDP when ``dp_replicate`` > 1), the routed experts
  over ``dp_replicate`` x ``dp_shard`` (the ranks that hold the same experts), each its own unit.
  An expert's gradient arrives summed over the EP ranks' tokens (the all-to-all's backward), so
  it is divided by ``ep`` more than a dense one, in the experts' own backward
  (``GroupedExperts.gradient_divide_factor``).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

from hyper_parallel.models.qwen3_5.activation_checkpoint import ac_depth
from hyper_parallel.models.qwen3_5.parallelize import (
    _ReplicateParams,
    apply_ac,
    apply_tp,
    set_fsdp_prefetch,
    shard_vision_tower,
    split_mp_policy,
)
from hyper_parallel.models.qwen3_5.parallelize_v2 import (
    CPU_OFFLOAD_FIELD,
    MIXED_PRECISION_FIELD,
    _ac_mode,
    _compile_model_requested,
    _mesh_names,
    apply_compile,
    data_parallel_mesh,
    fsdp_prefetch_depths,
    mp_policy_from_training,
    needs_fsdp,
    refuse_without_data_axis,
)
from hyper_parallel.utils.errors import ConfigError

from .expert_parallel import AllToAllDispatcher
from .model_config import CP_REFUSAL
from .model import moe_blocks

logger = logging.getLogger(__name__)

__all__ = ["MOE_MLP_PLAN", "apply_ep", "apply_moe_fsdp", "dense_data_mesh", "parallelize_qwen3_5_moe"]

#: The TP plan of a MoE feed-forward (paths relative to the decoder layer).
MOE_MLP_PLAN = {
    "mlp.shared_expert.gate_proj": ColwiseParallel,
    "mlp.shared_expert.up_proj": ColwiseParallel,
    "mlp.shared_expert.down_proj": RowwiseParallel,
    "mlp.shared_expert_gate": _ReplicateParams,
    "mlp.gate": _ReplicateParams,
    "mlp.experts": _ReplicateParams,
}


# ====================================================================== meshes
def dense_data_mesh(parallel_dims: Any) -> DeviceMesh | None:
    """The mesh FSDP shards the dense parameters over: every data-parallel axis plus ``ep``
    (its ranks train on different rows). ``(dp_replicate, <the rest>)`` (HSDP) when
    ``dp_replicate`` exists; ``None`` without any such axis (pure TP)."""
    names = _mesh_names(parallel_dims)
    if "ep" not in names:
        return data_parallel_mesh(parallel_dims)
    shard = "dp_shard_ep" if "dp_shard" in names else "ep"
    if "dp_replicate" in names:
        return parallel_dims.world_mesh[("dp_replicate", shard)]
    return parallel_dims.get_mesh(shard)


def _expert_mesh(parallel_dims: Any) -> DeviceMesh:
    """The mesh of the routed experts' DTensors: ``ep`` (and ``tp``, over which they are
    replicated, when it exists)."""
    names = _mesh_names(parallel_dims)
    dims = ("ep", "tp") if "tp" in names else ("ep",)
    return parallel_dims.world_mesh[dims]


# ====================================================================== expert parallelism
def apply_ep(model: nn.Module, parallel_dims: Any) -> nn.Module:
    """Shard every MoE block's experts over the ``ep`` axis and give the block its dispatcher.

    Each fused expert weight becomes a DTensor ``Shard(0)`` over ``ep`` (``Replicate`` over
    ``tp`` when it exists): rank ``r`` holds experts ``[r E/ep, (r+1) E/ep)``. On the meta device
    nothing is communicated. Returns ``model``.
    """
    mesh = _expert_mesh(parallel_dims)
    ep_mesh = parallel_dims.get_mesh("ep")
    placements = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    for block in moe_blocks(model):
        experts = block.experts
        for name, param in list(experts.named_parameters(recurse=False)):
            full = param.detach()
            full = full.to_local() if isinstance(full, DTensor) else full
            sharded = distribute_tensor(full, mesh, placements)
            experts.register_parameter(
                name, nn.Parameter(sharded, requires_grad=param.requires_grad)
            )
        block.dispatcher = AllToAllDispatcher(ep_mesh, block.num_experts)
        # The loss is scaled for an average over every rank that trains on different rows; an
        # expert's gradient already sums the rows of all EP ranks (the all-to-all's backward),
        # and only the data-parallel ranks average it.
        experts.gradient_divide_factor = parallel_dims.ep
    return model


# ====================================================================== FSDP
def apply_moe_fsdp(
    model: nn.Module,
    dense_mesh: DeviceMesh,
    expert_mesh: DeviceMesh | None,
    *,
    mp_policy: MixedPrecisionPolicy | None,
    reshard_after_forward: bool,
    cpu_offload: bool,
    forward_prefetch: int = 0,
    backward_prefetch: int = 0,
) -> nn.Module:
    """FSDP2 units: every block's routed experts over ``expert_mesh`` (when given), then every
    decoder layer and the root over ``dense_mesh``; without an ``expert_mesh`` the experts are
    left out of FSDP (``ignored_params``). The decoder layers prefetch ``forward_prefetch`` /
    ``backward_prefetch`` layers deep, each layer with its experts' unit
    (:func:`~hyper_parallel.models.qwen3_5.parallelize.set_fsdp_prefetch`)."""
    kwargs: dict[str, Any] = {"reshard_after_forward": reshard_after_forward}
    if cpu_offload:
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=torch.cuda.is_available())
    layer_policy, root_policy = split_mp_policy(mp_policy)
    layer_mp = {} if layer_policy is None else {"mp_policy": layer_policy}
    root_mp = {} if root_policy is None else {"mp_policy": root_policy}
    ignored: set[nn.Parameter] = set()
    for block in moe_blocks(model):
        if expert_mesh is not None:
            fully_shard(block.experts, mesh=expert_mesh, **kwargs, **layer_mp)
        else:
            ignored.update(block.experts.parameters())
    extra = {"ignored_params": ignored} if ignored else {}
    tower = shard_vision_tower(model, mesh=dense_mesh, **kwargs, **layer_mp)
    for layer in model.model.layers:
        fully_shard(layer, mesh=dense_mesh, **kwargs, **layer_mp, **extra)
    fully_shard(model, mesh=dense_mesh, **kwargs, **root_mp, **extra)
    set_fsdp_prefetch(
        [*tower,
         *([layer, *([b.experts for b in moe_blocks(layer)] if expert_mesh is not None else [])]
           for layer in model.model.layers)],
        forward=forward_prefetch, backward=backward_prefetch)
    return model


def _check_layout(parallel_dims: Any) -> None:
    cp = getattr(parallel_dims, "cp", 1) or 1
    if cp > 1:
        raise ConfigError(f"{cp}: {CP_REFUSAL}", path="parallelism.context_parallel_degree")
    etp = getattr(parallel_dims, "etp", 1) or 1
    if parallel_dims.ep > 1 and etp > 1:
        raise NotImplementedError(
            f"parallelism.expert_tensor_parallel_degree={etp}: expert tensor parallelism is not "
            "implemented; set it to 1"
        )


# ====================================================================== the entry
def parallelize_qwen3_5_moe(
    model: nn.Module,
    parallel_dims: Any,
    *,
    training: Any,
    parallelism: Any,
    activation_checkpoint: Any,
    compile: Any,
    dump_folder: str | None = None,
) -> nn.Module:
    """TP -> EP -> AC -> compile -> FSDP on ``model`` (in place, usually on ``meta``); returns it.

    The sections and their rules are the dense entry's
    (:func:`~hyper_parallel.models.qwen3_5.parallelize_v2.parallelize_qwen3_5_v2`); the expert
    placement is this module's (see its docstring). Everything is validated first.
    """
    _check_layout(parallel_dims)
    mp_policy = mp_policy_from_training(training)
    ac_mode = _ac_mode(activation_checkpoint)
    compile_model = _compile_model_requested(compile)
    backend = getattr(compile, "backend", None) or "inductor"
    reshard = bool(getattr(parallelism, "reshard_after_forward", True))
    cpu_offload = bool(getattr(training, "enable_cpu_offload", False))
    names = _mesh_names(parallel_dims)
    ep = parallel_dims.ep if "ep" in names else 1
    dense_mesh = dense_data_mesh(parallel_dims)
    expert_mesh = data_parallel_mesh(parallel_dims) if ep > 1 else dense_mesh
    if dense_mesh is None and mp_policy is not None:
        refuse_without_data_axis(
            "training.mixed_precision_param / _reduce / _output ask for mixed precision "
            f"({mp_policy})", names, MIXED_PRECISION_FIELD)
    fsdp = needs_fsdp(dense_mesh, mp_policy, cpu_offload)
    prefetch = fsdp_prefetch_depths(parallelism, fsdp=fsdp, names=names)
    ac_layers = getattr(activation_checkpoint, "num_layers", None)
    ac_depth(model, ac_mode, ac_layers)
    if "tp" in names:
        apply_tp(model, parallel_dims.get_mesh("tp"), MOE_MLP_PLAN)
    if ep > 1:
        apply_ep(model, parallel_dims)
    apply_ac(model, ac_mode, ac_layers)
    if compile_model:
        # fullgraph=False: routing syncs with the host (token counts per expert), a graph break.
        apply_compile(model, backend=backend, fullgraph=False)
    if fsdp:
        apply_moe_fsdp(
            model, dense_mesh, expert_mesh if needs_fsdp(expert_mesh, mp_policy, cpu_offload)
            else None, mp_policy=mp_policy, reshard_after_forward=reshard,
            cpu_offload=cpu_offload, forward_prefetch=prefetch[0], backward_prefetch=prefetch[1],
        )
    elif cpu_offload:
        refuse_without_data_axis("training.enable_cpu_offload asks for CPU offload", names,
                                 CPU_OFFLOAD_FIELD)
    logger.info(
        "qwen3_5_moe parallelized: mesh dims=%s tp=%s ep=%s ac=%s compile=%s fsdp=%s experts "
        "fsdp=%s mp=%s",
        names,
        getattr(parallel_dims, "tp", 1),
        ep,
        ac_mode,
        backend if compile_model else None,
        dense_mesh.mesh_dim_names if fsdp else None,
        expert_mesh.mesh_dim_names if fsdp and expert_mesh is not None and ep > 1 else None,
        mp_policy,
    )
    return model
