"""Activation checkpointing of the Qwen3.5 decoder layers: ``full`` (recompute the whole layer in
the backward, keep only its input) or ``selective`` (keep the outputs of matmuls, attention and
tensor-parallel collectives, recompute the cheap pointwise work).

``num_layers`` (``activation_checkpoint.num_layers``, legacy
``train.gradient_checkpointing.num_layers``) bounds it to part of the stack, as the later legacy
snapshots define it: unset, every layer; ``N``, the first N layers of every pipeline stage (of
the model without pipeline parallelism); a list, the first ``num_layers[s]`` layers of stage
``s`` (one entry per stage, which :func:`~hyper_parallel.models.pipelining.stage_position` reads
from the stage module). The first layers of a stage are the ones whose activations wait longest
for their backward, so they are the ones worth recomputing.

Applied between tensor parallel and FSDP (:mod:`.parallelize`, which re-exports these names).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointWrapper,
    checkpoint_wrapper,
)
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

from hyper_parallel.models.pipelining import stage_position
from hyper_parallel.utils.choices import AC_MODES
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "NUM_LAYERS_FIELD",
    "SAC_SAVED_OPS",
    "ac_depth",
    "apply_ac",
    "checkpoint_depth",
    "checkpointed_layers",
    "normalize_ac_mode",
]

#: The recipe field errors about ``num_layers`` name (the legacy front door names its key).
NUM_LAYERS_FIELD = "activation_checkpoint.num_layers"

_AC_OFF = {"off", "none", ""}


def _op(namespace: Any, name: str, overload: str = "default") -> Any:
    packet = getattr(namespace, name, None)
    return getattr(packet, overload, None) if packet is not None else None


def _sac_saved_ops() -> frozenset:
    """Ops whose outputs selective AC keeps (everything else is recomputed in backward)."""
    aten = torch.ops.aten
    funcol = torch.ops._c10d_functional
    candidates = [
        # matmuls: every nn.Linear (mm / addmm), the GDN chunk algebra (bmm), attention
        _op(aten, "mm"),
        _op(aten, "addmm"),
        _op(aten, "bmm"),
        _op(aten, "baddbmm"),
        _op(aten, "linalg_solve_triangular"),  # the GDN intra-chunk triangular solves
        _op(aten, "_scaled_dot_product_flash_attention_for_cpu"),
        _op(aten, "_scaled_dot_product_flash_attention"),
        _op(aten, "_scaled_dot_product_efficient_attention"),
        _op(aten, "_scaled_dot_product_cudnn_attention"),
        # TP collectives: recomputing them would repeat the communication in backward
        _op(funcol, "all_reduce"),
        _op(funcol, "all_gather_into_tensor"),
        _op(funcol, "reduce_scatter_tensor"),
        # context parallelism's all-to-alls (all-gathers are above)
        _op(funcol, "all_to_all_single"),
        _op(funcol, "wait_tensor"),
    ]
    return frozenset(op for op in candidates if op is not None)


SAC_SAVED_OPS = _sac_saved_ops()
"""Outputs saved by ``selective`` AC: matmuls (``mm``, ``addmm``, ``bmm``, ``baddbmm``), the GDN
triangular solves, scaled-dot-product attention kernels and functional collectives (TP
all-reduce / all-gather / reduce-scatter, context parallelism's all-to-all, and their waits). Pointwise ops, norms, RoPE, softmax,
the depthwise conv, SiLU / sigmoid gates and the L2 norms are recomputed: they are cheap in FLOPs
but their outputs are as large as the matmul ones."""


def _sac_policy(_ctx: Any, op: Any, *_args: Any, **_kwargs: Any) -> CheckpointPolicy:
    if op in SAC_SAVED_OPS:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def _sac_context_fn() -> tuple[Any, Any]:
    return create_selective_checkpoint_contexts(_sac_policy)


def normalize_ac_mode(mode: Any) -> str:
    """Canonical AC mode: ``off`` / ``full`` / ``selective``.

    ``None``, ``False``, ``""``, ``"off"`` and ``"none"`` mean off; ``True`` means ``full`` (the
    legacy trainer wrapped every layer for any truthy value). Unknown strings raise ``ValueError``.
    """
    if mode is None or mode is False:
        return "off"
    if mode is True:
        return "full"
    text = str(mode).strip().lower()
    if text in _AC_OFF:
        return "off"
    if text in ("full", "selective"):
        return text
    raise ValueError(
        f"train.gradient_checkpointing.activation_checkpoint={mode!r} is not a valid mode"
        f"{did_you_mean(text, AC_MODES)}; valid modes: {', '.join(AC_MODES)}"
    )


def checkpoint_depth(num_layers: Any, layers: int, *, stage: int = 0, num_stages: int = 1) -> int:
    """How many of a stage's first ``layers`` decoder layers are checkpointed.

    ``num_layers``: ``None`` (all of them), a count (the same for every stage) or a list of one
    count per stage (entry ``stage`` of ``num_stages``). A count above ``layers`` means all,
    0 none. A negative count, a non-integer or a list of another length is a ``ConfigError``
    naming :data:`NUM_LAYERS_FIELD`.
    """
    if num_layers is None:
        return layers
    if isinstance(num_layers, (list, tuple)):
        if len(num_layers) != num_stages:
            where = "pipeline stage" if num_stages == 1 else "pipeline stages"
            raise ConfigError(
                f"{list(num_layers)} has {len(num_layers)} entries but the run has {num_stages} "
                f"{where} (one count per stage: pipeline degree x stages per rank); give one "
                "entry per stage, or one number for every stage",
                path=NUM_LAYERS_FIELD,
            )
        count = num_layers[stage]
    else:
        count = num_layers
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ConfigError(
            f"{num_layers!r}: counts of layers must be integers >= 0", path=NUM_LAYERS_FIELD
        )
    return min(count, layers)


def checkpointed_layers(model: nn.Module) -> list[int]:
    """The indices (in the whole model) of the decoder layers of ``model`` -- the model, or a
    pipeline stage of it -- that are wrapped for activation checkpointing."""
    return [
        int(name)
        for name, layer in model.model.layers.named_children()
        if isinstance(layer, CheckpointWrapper)
    ]


def ac_depth(model: nn.Module, mode: Any, num_layers: Any = None) -> int:
    """How many decoder layers :func:`apply_ac` wraps in ``model`` (the whole model, or a
    pipeline stage carrying its :func:`~hyper_parallel.models.pipelining.stage_position`): 0
    when ``mode`` is off, else :func:`checkpoint_depth`. ``num_layers`` with ``mode`` off is a
    ``ConfigError`` (it would do nothing). Touches nothing: callers validate with it first."""
    if normalize_ac_mode(mode) == "off":
        if num_layers is not None:
            raise ConfigError(
                f"{num_layers!r} only applies with activation checkpointing; set "
                "activation_checkpoint.mode to full or selective, or unset it",
                path=NUM_LAYERS_FIELD,
            )
        return 0
    stage, num_stages = stage_position(model)
    return checkpoint_depth(num_layers, len(model.model.layers), stage=stage,
                            num_stages=num_stages)


def apply_ac(model: nn.Module, mode: Any, num_layers: Any = None) -> nn.Module:
    """Activation checkpointing on the decoder layers of ``model`` (in place); returns ``model``.

    Every layer, or with ``num_layers`` the first ones of the stage (:func:`checkpoint_depth`;
    ``model`` is a pipeline stage when it carries its
    :func:`~hyper_parallel.models.pipelining.stage_position`); ``num_layers`` with ``mode`` off
    is a ``ConfigError`` (it would do nothing).

    * ``off`` / ``none``: nothing.
    * ``full``: ``checkpoint_wrapper(layer)``: only the layer input is kept; the whole layer is
      recomputed in backward.
    * ``selective``: ``checkpoint_wrapper`` with a ``create_selective_checkpoint_contexts`` policy
      that keeps the outputs of :data:`SAC_SAVED_OPS` (matmuls, attention, TP collectives) and
      recomputes everything else.

    Apply after TP (TP hooks then run inside the checkpointed region, and with ``full`` the
    forward collectives are replayed in backward) and before FSDP (each FSDP unit is a wrapped
    layer). ``named_parameters()`` then contain ``_checkpoint_wrapped_module``; see
    :func:`~hyper_parallel.utils.module_names.strip_wrapper_prefixes`.
    """
    depth = ac_depth(model, mode, num_layers)
    mode = normalize_ac_mode(mode)
    if mode == "off":
        return model
    layers = model.model.layers
    already = [i for i, layer in enumerate(layers) if isinstance(layer, CheckpointWrapper)]
    if already:
        raise RuntimeError(
            f"model.layers {already} are already wrapped for activation checkpointing; "
            "apply_ac must run once"
        )
    for i, layer in enumerate(layers):
        if i >= depth:
            break
        if mode == "full":
            layers[i] = checkpoint_wrapper(layer)
        else:
            layers[i] = checkpoint_wrapper(layer, context_fn=_sac_context_fn)
    return model
