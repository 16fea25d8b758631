"""Activation checkpointing of the Qwen3.5 decoder layers: ``full`` (recompute the whole layer in
the backward, keep only its input) or ``selective`` (keep the outputs of matmuls, attention and
tensor-parallel collectives, recompute the cheap pointwise work).

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

from hyper_parallel.utils.choices import AC_MODES
from hyper_parallel.utils.suggest import did_you_mean

__all__ = ["SAC_SAVED_OPS", "apply_ac", "normalize_ac_mode"]

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
        _op(funcol, "wait_tensor"),
    ]
    return frozenset(op for op in candidates if op is not None)


SAC_SAVED_OPS = _sac_saved_ops()
"""Outputs saved by ``selective`` AC: matmuls (``mm``, ``addmm``, ``bmm``, ``baddbmm``), the GDN
triangular solves, scaled-dot-product attention kernels and functional collectives (TP
all-reduce / all-gather / reduce-scatter and their waits). Pointwise ops, norms, RoPE, softmax,
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


def apply_ac(model: nn.Module, mode: Any) -> nn.Module:
    """Activation checkpointing on every decoder layer of ``model`` (in place); returns ``model``.

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
        if mode == "full":
            layers[i] = checkpoint_wrapper(layer)
        else:
            layers[i] = checkpoint_wrapper(layer, context_fn=_sac_context_fn)
    return model
