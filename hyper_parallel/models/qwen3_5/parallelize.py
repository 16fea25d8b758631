"""Parallelization of the Qwen3.5 dense model: tensor parallel, activation checkpointing, FSDP2.

The building blocks are plain functions so that any trainer can compose them. The entry is
:func:`hyper_parallel.models.qwen3_5.parallelize_v2.parallelize_qwen3_5_v2` (the model spec's
``parallelize_fn``), which applies them in the order **CP -> TP -> AC -> compile -> FSDP**
(CP is :func:`hyper_parallel.models.qwen3_5.context_parallel.apply_cp`; compile is
``parallelize_v2.apply_compile``):

* :func:`apply_tp` shards every layer type over a 1-D ``tp`` mesh with
  ``torch.distributed.tensor.parallel`` (Megatron-style, no sequence parallelism: activations
  between blocks are replicated on every TP rank). After it, *every* parameter is a DTensor on the
  TP mesh, so FSDP2 composes on the data-parallel mesh (2-D FSDP x TP, or 3-D HSDP x TP).
* :func:`apply_ac` wraps each decoder layer with ``checkpoint_wrapper`` (``full``) or with a
  selective-checkpoint policy that saves matmul / attention / collective outputs
  (``selective``).
* :func:`apply_fsdp` calls ``fully_shard`` on an image-text model's vision blocks and tower
  (:func:`shard_vision_tower`), on every decoder layer, then on the root, and sets
  the explicit prefetching of :func:`set_fsdp_prefetch` (``parallelism.fsdp_forward_prefetch``
  / ``fsdp_backward_prefetch``; the MoE model's FSDP units use it too).

Tensor-parallel layout (``tp`` = TP degree; "colwise" shards the output features, "rowwise" the
input features and all-reduces the output):

=====================================  ===========================================================
module / parameter                     placement on the TP mesh
=====================================  ===========================================================
``model.embed_tokens``                 rowwise on the vocab (``Shard(0)``); output all-reduced
``lm_head``                            colwise on the vocab (``Shard(0)``); logits all-gathered
                                       (``Replicate``), so the loss sees ordinary full logits
``self_attn.{q,k,v}_proj``             colwise on head boundaries (``q_proj`` is head-interleaved
                                       ``[Q_h | gate_h]``, so a head's query and gate stay together)
``self_attn.o_proj``                   rowwise
``self_attn.{q,k}_norm``               weight ``Replicate``; runs on the rank's heads as a
                                       ``Shard(head dim)`` DTensor (see "replicated weights" below)
``linear_attn.in_proj_{q,k,v,z,b,a}``  colwise (head-aligned: every width is heads x head size)
``linear_attn.conv_{q,k,v}_weight``    ``Shard(0)`` by channel = by head (the model calls
``linear_attn.{dt_bias, A_log}``       ``_local()`` on them); ``Shard(0)`` by value head
``linear_attn.norm``                   like ``q_norm`` (per-head gated RMSNorm, weight replicated)
``linear_attn.out_proj``               rowwise
``mlp.{gate,up}_proj`` / ``down_proj``  colwise / rowwise
``input_layernorm``, ``post_attention_layernorm``, ``model.norm``
                                       weight ``Replicate``; the activations they see are full and
                                       identical on every rank, and the model uses the local weight
=====================================  ===========================================================

Replicated weights and their gradients. A norm over *replicated* activations (the layer norms,
the final norm) computes the full gradient on every rank, so its ``Replicate`` gradient is
already correct. A norm over a rank's *own heads* (``q_norm``, ``k_norm``, the GDN gated norm)
only sees part of the sum that makes its weight gradient; there the input is wrapped as a DTensor
sharded on the head dimension, so DTensor autograd produces a ``Partial`` gradient. Nobody
downstream sees it: a post-accumulate-grad hook (registered lazily in the norm's forward
pre-hook, so it survives ``to_empty`` and FSDP's parameter swaps) all-reduces it into a
``Replicate`` gradient right away, so optimizers, grad clipping and local-shard math all see the
true gradient.

Requirements (checked, ``ValueError`` naming the field): ``num_attention_heads``,
``num_key_value_heads`` (when the model has full-attention layers), ``linear_num_key_heads``,
``linear_num_value_heads`` (when it has Gated DeltaNet layers), ``intermediate_size`` and
``vocab_size`` divisible by ``tp``. Tied embeddings work with TP: the embedding and ``lm_head``
both shard the vocab dimension, so they keep sharing one ``Shard(0)`` parameter.

Meta-device flow: build on ``meta`` -> ``parallelize_qwen3_5_v2`` ->
``model.to_empty(device=...)`` -> ``model.init_weights()`` (which draws full tensors and keeps the
local shard) -> ``model.tie_weights()``. Nothing here touches values, so sharding on ``meta`` allocates nothing.

Parameter names: activation checkpointing inserts ``_checkpoint_wrapped_module`` after the layer
index in ``named_parameters()`` (``model.layers.0._checkpoint_wrapped_module.mlp.up_proj.weight``).
``state_dict()`` keys are clean (the wrapper strips the infix in a state-dict hook and adds it
back on load); use :func:`strip_wrapper_prefixes` (``hyper_parallel.utils.module_names``, re-exported
here) for names from ``named_parameters()``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointWrapper,
)
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    parallelize_module,
)

from hyper_parallel.models.qwen3_5.activation_checkpoint import (
    SAC_SAVED_OPS,
    apply_ac,
    checkpointed_layers,
    normalize_ac_mode,
)
from hyper_parallel.models.qwen3_5.model_config import tp_divisibility_problems
from hyper_parallel.platform import get_platform
from hyper_parallel.utils.module_names import strip_wrapper_prefixes

__all__ = [
    "ATTENTION_PLAN",
    "DEFAULT_DTYPE_MAP",
    "GATED_DELTANET_PLAN",
    "MLP_PLAN",
    "SAC_SAVED_OPS",
    "apply_ac",
    "apply_fsdp",
    "apply_tp",
    "build_mp_policy",
    "checkpointed_layers",
    "normalize_ac_mode",
    "set_fsdp_prefetch",
    "shard_vision_tower",
    "split_mp_policy",
    "strip_wrapper_prefixes",
    "validate_tp_degree",
]


# ====================================================================== tensor parallel
class _NotAView(torch.autograd.Function):
    """Identity whose output is ``x.detach()``: the same memory, no copy, but not a view of
    ``x`` (``_base`` is None; the version counter stays shared, so autograd still catches an
    in-place change of a tensor saved for backward)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.detach()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


class _ColwiseLogits(ColwiseParallel):
    """``ColwiseParallel`` whose plain-tensor output is not a view (:class:`_NotAView`).

    ``DTensor.to_local()`` returns ``view_as`` of the local tensor. The logits are what the
    root FSDP2 unit returns, and an in-place op on a view output would rebase its autograd
    history and drop FSDP's pre-backward hook (FSDP2 warns "returned a view tensor" on every
    step of an FSDP x TP run).
    """

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        outputs = ColwiseParallel._prepare_output_fn(
            output_layouts, use_local_output, mod, outputs, device_mesh)
        return _NotAView.apply(outputs) if use_local_output else outputs


class _ReplicateParams(ParallelStyle):
    """Turn the module's own parameters into ``Replicate`` DTensors; leave activations alone.

    For norms over replicated activations: the Qwen3.5 norms call ``_match_input``, which uses
    ``weight.to_local()`` when the input is a plain tensor. The gradient coming back through
    ``to_local`` is a ``Replicate`` DTensor holding the full gradient (every rank saw the full
    activations), which is exactly right.
    """

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        for name, param in list(module.named_parameters(recurse=False)):
            _register_dtensor_param(module, name, param, device_mesh, [Replicate()])
        return module


class _HeadLocalNorm(ParallelStyle):
    """A norm with a replicated weight applied to the rank's own heads (``q_norm``, GDN ``norm``).

    Every tensor input of rank ``>= 2`` is wrapped as a DTensor sharded on its second-to-last
    dimension (the head dimension of ``(B, S, H_local, D)``); the norm then runs on DTensors
    (it reduces over the last dimension only, so no communication happens in forward) and the
    output is returned as a local tensor. In backward, the weight gradient comes out ``Partial``
    (each rank holds its heads' share) and a post-accumulate-grad hook all-reduces it (see
    :func:`_reduce_partial_grad`).
    """

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        for name, param in list(module.named_parameters(recurse=False)):
            _register_dtensor_param(module, name, param, device_mesh, [Replicate()])

        def to_head_sharded(t: Any) -> Any:
            if isinstance(t, torch.Tensor) and not isinstance(t, DTensor) and t.dim() >= 2:
                return DTensor.from_local(t, device_mesh, [Shard(t.dim() - 2)], run_check=False)
            return t

        def pre_hook(mod: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            # Registered here, not in _apply: ``to_empty`` (swap_tensors) and FSDP replace the
            # parameter objects after parallelization, and hooks do not survive that.
            for param in mod.parameters(recurse=False):
                if param.requires_grad and not getattr(param, _HOOK_MARK, False):
                    param.register_post_accumulate_grad_hook(_reduce_partial_grad)
                    setattr(param, _HOOK_MARK, True)
            return (
                tuple(to_head_sharded(a) for a in args),
                {k: to_head_sharded(v) for k, v in kwargs.items()},
            )

        def post_hook(_mod: nn.Module, _args: tuple, output: Any) -> Any:
            return output.to_local() if isinstance(output, DTensor) else output

        module.register_forward_pre_hook(pre_hook, with_kwargs=True)
        module.register_forward_hook(post_hook)
        return module


class _ShardOwnParams(ParallelStyle):
    """``Shard(0)`` on the named parameters owned directly by the module (not by submodules).

    Used for the Gated DeltaNet conv weights (channels = heads x head size), ``dt_bias`` and
    ``A_log`` (one entry per value head). The model reads them through ``_local()``, so the rank
    meets exactly the channels / heads its column-sharded projections produce, and the gradient
    (``Shard(0)``) needs no communication.
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__()
        self.names = names

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        own = dict(module.named_parameters(recurse=False))
        missing = [n for n in self.names if n not in own]
        if missing:
            raise RuntimeError(
                f"{type(module).__name__} has no parameter(s) {missing}; the Qwen3.5 TP plan "
                f"expects {list(self.names)} (see gated_deltanet.py) - update parallelize.py"
            )
        for name in self.names:
            _register_dtensor_param(module, name, own[name], device_mesh, [Shard(0)])
        return module


def _register_dtensor_param(
    module: nn.Module, name: str, param: nn.Parameter, mesh: DeviceMesh, placements: list
) -> nn.Parameter:
    """Replace ``module.<name>`` by a DTensor parameter (rank 0's values are the source of truth;
    on ``meta`` nothing is communicated)."""
    new = nn.Parameter(
        distribute_tensor(param.data, mesh, placements), requires_grad=param.requires_grad
    )
    module.register_parameter(name, new)
    return new


_HOOK_MARK = "_hp_reduce_partial_grad_hook"


def _reduce_partial_grad(param: torch.Tensor) -> None:
    """Post-accumulate-grad hook: all-reduce a ``Partial`` DTensor gradient into ``Replicate``.

    Without FSDP this is what makes ``p.grad`` the true gradient on every TP rank (code that
    reads ``p.grad.to_local()`` would otherwise see only this rank's share). Under FSDP2 it runs
    on FSDP's unsharded parameter; FSDP then finds a ``Replicate`` gradient and only reduces over
    the data-parallel mesh - the same communication FSDP would have issued itself.
    """
    grad = param.grad
    if isinstance(grad, DTensor) and any(p.is_partial() for p in grad.placements):
        param.grad = grad.redistribute(grad.device_mesh, [Replicate()] * grad.device_mesh.ndim)


def validate_tp_degree(config: Any, tp: int) -> None:
    """Raise ``ValueError`` if any dimension Qwen3.5 shards over TP is not divisible by ``tp``.

    All violations are reported at once, e.g.
    ``linear_num_key_heads=2 is not divisible by tp=4``.
    """
    if tp < 1:
        raise ValueError(f"tp={tp} must be >= 1")
    problems = tp_divisibility_problems(config, tp)
    if problems:
        raise ValueError(
            "Qwen3.5 tensor parallelism shards heads / features evenly: "
            + "; ".join(problems)
            + ". Choose a train.accelerator.tp that divides them."
        )


#: A gated attention layer's tensor-parallel plan: its heads split (q / k / v column-parallel),
#: the output projection row-parallel. (The planner counts its exchanges from it.)
ATTENTION_PLAN = {
    "self_attn.q_proj": ColwiseParallel,
    "self_attn.k_proj": ColwiseParallel,
    "self_attn.v_proj": ColwiseParallel,
    "self_attn.o_proj": RowwiseParallel,
    "self_attn.q_norm": _HeadLocalNorm,
    "self_attn.k_norm": _HeadLocalNorm,
}
_GDN_DIRECT_PARAMS = ("conv_q_weight", "conv_k_weight", "conv_v_weight", "dt_bias", "A_log")
#: A Gated DeltaNet layer's: its six input projections column-parallel, the output row-parallel.
GATED_DELTANET_PLAN = {
    "linear_attn.in_proj_q": ColwiseParallel,
    "linear_attn.in_proj_k": ColwiseParallel,
    "linear_attn.in_proj_v": ColwiseParallel,
    "linear_attn.in_proj_z": ColwiseParallel,
    "linear_attn.in_proj_b": ColwiseParallel,
    "linear_attn.in_proj_a": ColwiseParallel,
    "linear_attn.norm": _HeadLocalNorm,
    "linear_attn.out_proj": RowwiseParallel,
}
_NORM_PLAN = {
    "input_layernorm": _ReplicateParams,
    "post_attention_layernorm": _ReplicateParams,
}
#: The dense feed-forward: Megatron's column-then-row split of the SwiGLU.
MLP_PLAN: dict[str, Callable[[], ParallelStyle]] = {
    "mlp.gate_proj": ColwiseParallel,
    "mlp.up_proj": ColwiseParallel,
    "mlp.down_proj": RowwiseParallel,
}


def _layer_plan(
    layer: nn.Module, mlp_plan: Mapping[str, Callable[[], ParallelStyle]]
) -> dict[str, ParallelStyle]:
    """The TP plan of one decoder layer, by its mixer type, with ``mlp_plan`` for its
    feed-forward."""
    plan: dict[str, ParallelStyle] = {
        k: style() for k, style in {**_NORM_PLAN, **mlp_plan}.items()
    }
    if hasattr(layer, "self_attn"):
        plan.update({k: style() for k, style in ATTENTION_PLAN.items()})
    elif hasattr(layer, "linear_attn"):
        plan.update({k: style() for k, style in GATED_DELTANET_PLAN.items()})
        plan["linear_attn"] = _ShardOwnParams(_GDN_DIRECT_PARAMS)
    else:
        raise RuntimeError(
            f"decoder layer {type(layer).__name__} has neither self_attn nor linear_attn"
        )
    return plan


#: The parameters tensor parallelism leaves whole (plain tensors) on every TP rank: the tower.
TP_REPLICATED_PREFIX = "model.visual."


def apply_tp(
    model: nn.Module,
    tp_mesh: DeviceMesh,
    mlp_plan: Mapping[str, Callable[[], ParallelStyle]] = MLP_PLAN,
) -> nn.Module:
    """Tensor-parallelize ``model`` (a ``Qwen3_5ForCausalLM``) in place over the 1-D ``tp_mesh``.

    See the module docstring for the layout; ``mlp_plan`` is the feed-forward's part (the
    mixture-of-experts family passes its own). Works on ``meta`` and on materialized models
    (then rank 0's values are scattered / broadcast). Must run before activation checkpointing
    and FSDP. Returns ``model``.
    """
    if tp_mesh.ndim != 1:
        raise ValueError(f"apply_tp needs a 1-D tp mesh, got a {tp_mesh.ndim}-D mesh {tp_mesh}")
    tp = tp_mesh.size()
    validate_tp_degree(model.config, tp)
    decoder = model.model
    tied = (
        model.lm_head is not None
        and decoder.embed_tokens is not None
        and model.lm_head.weight is decoder.embed_tokens.weight
    )
    outer_plan = {
        # Rowwise on an embedding shards the vocab; out-of-shard ids read zeros and the
        # all-reduce adds exactly one non-zero term per token, so the result is exact.
        "model.embed_tokens": RowwiseParallel(
            input_layouts=Replicate(), output_layouts=Replicate()
        ),
        "model.norm": _ReplicateParams(),
        # Replicated (all-gathered) logits: the loss code needs no TP awareness.
        "lm_head": _ColwiseLogits(output_layouts=Replicate()),
    }
    # A pipeline stage holds some of these modules only (the others are None).
    present = {k: v for k, v in outer_plan.items() if _submodule_or_none(model, k) is not None}
    if present:
        parallelize_module(model, tp_mesh, present)
    if tied:
        # Both sides shard the vocab dimension (Shard(0)), so one DTensor can serve both.
        model.lm_head.weight = decoder.embed_tokens.weight
    for layer in decoder.layers:
        layer = _unwrap(layer)  # tolerate AC applied first (the plan paths are layer-relative)
        parallelize_module(layer, tp_mesh, _layer_plan(layer, mlp_plan))

    # The vision tower is replicated over the TP ranks, as plain tensors: every rank runs all
    # of it on the same images, and its gradients are equal on every rank (the gradient that
    # reaches the image embeddings is the replicated one of the decoder's input). At the
    # published sizes it is ~0.5B parameters next to the decoder's 9-397B; FSDP shards it over
    # the data-parallel ranks like any other module.
    stray = [n for n, p in model.named_parameters()
             if not _on_mesh(p, tp_mesh) and not n.startswith(TP_REPLICATED_PREFIX)]
    if stray:
        raise RuntimeError(
            f"apply_tp left parameters that are not DTensors on the tp mesh: {stray}; "
            "add them to the Qwen3.5 TP plan in parallelize.py"
        )
    return model


def _submodule_or_none(model: nn.Module, path: str) -> nn.Module | None:
    owner = model
    for attr in path.split("."):
        owner = getattr(owner, attr, None)
        if owner is None:
            return None
    return owner


def _on_mesh(param: torch.Tensor, mesh: DeviceMesh) -> bool:
    return isinstance(param, DTensor) and param.device_mesh == mesh


def _unwrap(layer: nn.Module) -> nn.Module:
    return layer._checkpoint_wrapped_module if isinstance(layer, CheckpointWrapper) else layer


# ====================================================================== FSDP and mixed precision
#: Accepted dtype spellings -> torch dtypes: the torch platform's map (the spellings themselves
#: are ``hyper_parallel.platform.dtypes.DTYPE_ALIASES``). This module is torch-only, so it asks
#: for the torch platform by name rather than the one ``HYPER_PARALLEL_PLATFORM`` selects.
DEFAULT_DTYPE_MAP: Mapping[str, torch.dtype] = get_platform("torch").dtype_map


def _resolve_dtype(field: str, value: Any, dtype_map: Mapping[str, Any]) -> torch.dtype | None:
    if value is None or isinstance(value, torch.dtype):
        return value
    try:
        return dtype_map[str(value).strip().lower()]
    except KeyError:
        raise ValueError(
            f"train.mixed_precision.{field}={value!r} is not a known dtype; "
            f"valid names: {', '.join(dtype_map)}"
        ) from None


def build_mp_policy(
    mixed_precision_section: Any, dtype_map: Mapping[str, Any] | None = None
) -> MixedPrecisionPolicy | None:
    """The FSDP2 ``MixedPrecisionPolicy`` of a ``train.mixed_precision`` section, or ``None``.

    Fields: ``enabled`` (off -> ``None``), ``param_dtype`` (compute / all-gather dtype, default
    bfloat16), ``reduce_dtype`` (gradient reduction, default float32), ``output_dtype`` (dtype of
    the model's outputs, the logits; ``None``: they keep the compute dtype; :func:`apply_fsdp`
    applies it at the root unit only). Names are looked up in ``dtype_map`` (case-insensitive; default
    :data:`DEFAULT_DTYPE_MAP`: bfloat16/bf16, float16/fp16/half, float32/fp32/float); a
    ``torch.dtype`` is accepted as is. Stored parameters stay in their own (fp32) dtype.
    """
    if mixed_precision_section is None or not getattr(mixed_precision_section, "enabled", False):
        return None
    dtype_map = DEFAULT_DTYPE_MAP if dtype_map is None else dtype_map
    sec = mixed_precision_section
    return MixedPrecisionPolicy(
        param_dtype=_resolve_dtype(
            "param_dtype", getattr(sec, "param_dtype", "bfloat16"), dtype_map
        ),
        reduce_dtype=_resolve_dtype(
            "reduce_dtype", getattr(sec, "reduce_dtype", "float32"), dtype_map
        ),
        output_dtype=_resolve_dtype("output_dtype", getattr(sec, "output_dtype", None), dtype_map),
    )


def apply_fsdp(
    model: nn.Module,
    dp_mesh: DeviceMesh,
    *,
    mp_policy: MixedPrecisionPolicy | None = None,
    reshard_after_forward: bool = True,
    cpu_offload: bool = False,
    forward_prefetch: int = 0,
    backward_prefetch: int = 0,
) -> nn.Module:
    """FSDP2: ``fully_shard`` every decoder layer, then the root (embedding, final norm,
    ``lm_head`` and any tied weight form the root unit); then the decoder layers' explicit
    prefetching, ``forward_prefetch`` / ``backward_prefetch`` layers deep
    (:func:`set_fsdp_prefetch`; 0: FSDP's own). Returns ``model``.

    ``dp_mesh`` is 1-D (``dp_shard``: FSDP) or 2-D (``dp_replicate, dp_shard``: HSDP, replicated
    over dim 0 and sharded over dim 1). Parameters may already be TP DTensors on a sibling
    sub-mesh of the same root mesh (FSDP x TP). Each unit reduces its gradients with one bucketed
    reduce-scatter (FSDP2 always fuses per unit, which is what legacy ``comm_fusion`` asked for).
    ``mp_policy.output_dtype`` applies to the root unit only (the logits), see
    :func:`split_mp_policy`. ``cpu_offload`` gives every unit FSDP2's ``CPUOffloadPolicy``
    (parameters, gradients and optimizer state live in host memory; pinned when a GPU is
    present).
    """
    if dp_mesh.ndim not in (1, 2):
        raise ValueError(
            f"apply_fsdp needs a 1-D (dp_shard) or 2-D (dp_replicate, dp_shard) mesh, got "
            f"{dp_mesh.ndim}-D {dp_mesh.mesh_dim_names}"
        )
    kwargs: dict[str, Any] = {"mesh": dp_mesh, "reshard_after_forward": reshard_after_forward}
    if cpu_offload:
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=torch.cuda.is_available())
    layer_policy, root_policy = split_mp_policy(mp_policy)
    if getattr(model, "lm_head", True) is None:
        # A pipeline stage before the last: its outputs are hidden states for the next stage,
        # which computes in the compute dtype; only the head's logits take output_dtype.
        root_policy = layer_policy
    layer_mp = {} if layer_policy is None else {"mp_policy": layer_policy}
    tower = shard_vision_tower(model, **kwargs, **layer_mp)
    for layer in model.model.layers:
        fully_shard(layer, **kwargs, **layer_mp)
    fully_shard(model, **kwargs, **({} if root_policy is None else {"mp_policy": root_policy}))
    set_fsdp_prefetch([*tower, *([layer] for layer in model.model.layers)],
                      forward=forward_prefetch, backward=backward_prefetch)
    return model


def shard_vision_tower(model: nn.Module, **fsdp_kwargs: Any) -> list[list[nn.Module]]:
    """FSDP2 units of an image-text model's tower (``model.model.visual``, when it has one):
    every block, then the tower itself (patch and position embeddings, merger). Returns the
    blocks as prefetch units, in execution order (they run before the decoder layers, so the
    prefetch chain runs from the tower's blocks into the decoder's). A frozen tower is sharded
    the same way (no gradients to reduce, only its weights to gather)."""
    tower = getattr(model.model, "visual", None)
    if tower is None:
        return []
    for block in tower.blocks:
        fully_shard(block, **fsdp_kwargs)
    fully_shard(tower, **fsdp_kwargs)
    return [[block] for block in tower.blocks]


def set_fsdp_prefetch(units: Sequence[Sequence[nn.Module]], *, forward: int = 0,
                      backward: int = 0) -> None:
    """FSDP2's explicit prefetching over the decoder layers, ``units`` in execution order:
    ``units[i]`` are the FSDP units of layer ``i``, the layer's own first, then units nested in
    it (a mixture-of-experts layer's routed experts).

    ``forward`` = N: the forward of layer ``i`` issues the all-gathers of the units of layers
    ``i+1 .. i+N`` (``set_modules_to_forward_prefetch``); ``backward`` = N: the backward of
    layer ``i`` issues those of layers ``i-1 .. i-N`` (``set_modules_to_backward_prefetch``).
    0 leaves FSDP's own behaviour (implicit forward overlap; one unit back in reverse forward
    order). The depths of the later legacy snapshots (``fsdp_forward_prefetch`` /
    ``fsdp_backward_prefetch``). Prefetching moves when parameters are gathered, never what
    is computed: the losses are the same bit for bit, and a depth of N keeps up to N more
    layers gathered.
    """
    if forward < 0 or backward < 0:
        raise ValueError(f"prefetch depths must be >= 0, got forward={forward}, "
                         f"backward={backward}")
    for i, group in enumerate(units):
        if forward:
            ahead = [unit for later in units[i + 1:i + 1 + forward] for unit in later]
            if ahead:
                group[0].set_modules_to_forward_prefetch(ahead)
        if backward:
            before = [unit for earlier in reversed(units[max(0, i - backward):i])
                      for unit in earlier]
            if before:
                group[0].set_modules_to_backward_prefetch(before)


def split_mp_policy(
    mp_policy: MixedPrecisionPolicy | None,
) -> tuple[MixedPrecisionPolicy | None, MixedPrecisionPolicy | None]:
    """``(decoder-layer policy, root policy)`` of one model-wide policy.

    ``output_dtype`` is the dtype of the *model's* outputs (the logits), so only the root unit
    (embedding, final norm, ``lm_head``) casts its output to it. FSDP2 applies a unit's
    ``output_dtype`` to that unit's forward outputs: given to every decoder layer, the last layer
    would hand e.g. float32 activations to the root's final norm and ``lm_head``, which compute
    with ``param_dtype`` weights, and the first forward would fail on the dtype mismatch. The
    decoder layers therefore hand on the compute dtype (``output_dtype=param_dtype``; ``None``
    when ``param_dtype`` is ``None``), which is what the next unit computes in anyway. A policy
    whose ``output_dtype`` is unset or already ``param_dtype`` is used unchanged for every unit.
    """
    if mp_policy is None or mp_policy.output_dtype in (None, mp_policy.param_dtype):
        return mp_policy, mp_policy
    return dataclasses.replace(mp_policy, output_dtype=mp_policy.param_dtype), mp_policy
