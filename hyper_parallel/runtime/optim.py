"""Optimizer, learning-rate schedule and gradient clipping shared by every trainer."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hyper_parallel.utils.choices import DECAY_STYLES, NO_DECAY_KEYWORDS, OPTIMIZER_TYPE_OF_NAME
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.lr_warmup import warmup_steps_from_ratio  # noqa: F401 (re-exported)


def build_param_groups(
    model: torch.nn.Module,
    weight_decay: float,
    no_decay_keywords: Sequence[str] = NO_DECAY_KEYWORDS,
) -> list[dict]:
    """``[decay group, no-decay group]`` in that fixed order (both kept even when empty or when
    ``weight_decay`` is 0, so the optimizer's reduction order never depends on the config).

    Frozen parameters are skipped; tied parameters are counted once (first name wins).
    """
    decay, no_decay, seen = [], [], set()
    for name, param in model.named_parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        lowered = name.lower()
        (no_decay if any(k in lowered for k in no_decay_keywords) else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


#: Optimizer classes by their lower-case name (the legacy ``train.optimizer.type`` values).
OPTIMIZER_CLASSES: dict[str, type[torch.optim.Optimizer]] = {
    legacy_type: getattr(torch.optim, name) for name, legacy_type in OPTIMIZER_TYPE_OF_NAME.items()
}


def build_optimizer(
    model: torch.nn.Module,
    *,
    name: str,
    lr: float,
    betas: Sequence[float],
    eps: float,
    weight_decay: float,
    foreach: bool | None = None,
    fused: bool | None = None,
    no_decay_keywords: Sequence[str] = NO_DECAY_KEYWORDS,
) -> torch.optim.Optimizer:
    """AdamW (decoupled decay) or Adam (L2 decay added to the gradient) over the two groups
    of :func:`build_param_groups` (``no_decay_keywords`` selects the no-decay group)."""
    groups = build_param_groups(model, weight_decay, no_decay_keywords)
    try:
        cls = OPTIMIZER_CLASSES[name.lower()]
    except KeyError:
        raise ConfigError(
            f"{name!r} is not supported; choose one of: {', '.join(OPTIMIZER_CLASSES)} "
            "(case-insensitive)",
            path="optimizer.name",
        ) from None
    foreach, fused = choose_implementation(groups, foreach=foreach, fused=fused)
    return cls(groups, lr=lr, betas=tuple(betas), eps=eps, foreach=foreach, fused=fused)


def choose_implementation(
    groups: Sequence[dict], *, foreach: bool | None, fused: bool | None,
    device_type: str | None = None,
) -> tuple[bool | None, bool | None]:
    """``(foreach, fused)`` for the optimizer over ``groups``.

    What the config says wins. When it says nothing (both ``None``) and every parameter is a
    floating-point CUDA tensor (FSDP / TP DTensors included), ``fused=True``: one kernel per
    step instead of torch's default multi-tensor (foreach) loop. Anywhere else both stay
    ``None`` -- torch's own choice, so CPU runs are bit-identical to what they always were.
    ``device_type``: the device the parameters step on when it is not their own (preflight
    makes the GPU's choice for the fake tensors it holds on the host).
    """
    if foreach is None and fused is None:
        params = [p for group in groups for p in group["params"]]
        if params and all((device_type or p.device.type) == "cuda" and p.is_floating_point()
                          for p in params):
            return None, True
    return foreach, fused


@dataclass
class LRFactor:
    """Multiplier of the peak LR after ``step`` scheduler steps (step 0 = first optimizer step).

    Linear warmup over ``warmup_steps`` starting at 0, then ``constant``, ``cosine`` or
    ``linear`` decay from 1 to ``min_ratio`` at ``total_steps``. Past ``total_steps`` the factor
    stays at its final value. A dataclass (not a lambda) so that LambdaLR can save its state.
    """

    total_steps: int
    warmup_steps: int
    decay_style: str
    min_ratio: float

    def __post_init__(self) -> None:
        if self.decay_style not in DECAY_STYLES:
            raise ConfigError(
                f"{self.decay_style!r} is not supported; choose one of: {', '.join(DECAY_STYLES)}",
                path="lr_scheduler.decay_style",
            )

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / max(1, self.warmup_steps)
        if self.decay_style == "constant":
            return 1.0
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        if self.decay_style == "linear":
            shape = 1.0 - progress
        else:
            shape = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_ratio + (1.0 - self.min_ratio) * shape


def build_lr_scheduler(
    optimizer: torch.optim.Optimizer,
    *,
    total_steps: int,
    warmup_steps: int,
    decay_style: str,
    lr: float,
    lr_min: float,
) -> torch.optim.lr_scheduler.LambdaLR:
    factor = LRFactor(
        total_steps=total_steps,
        warmup_steps=warmup_steps,
        decay_style=decay_style,
        min_ratio=(lr_min / lr) if lr > 0 else 0.0,
    )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def clip_grad_norm_(
    parameters: Iterable[torch.nn.Parameter],
    max_norm: float,
    *,
    pipeline_group: Any = None,
    uncounted: frozenset[int] | set[int] = frozenset(),
) -> torch.Tensor:
    """Total L2 norm of the gradients (DTensor-aware); clip to ``max_norm`` when it is > 0.

    Returns the norm before clipping as a plain tensor. ``max_norm <= 0`` only measures.

    Under pipeline parallelism each rank holds some stages' parameters: ``pipeline_group``
    (the ``pp`` ranks) adds the squares of every stage's norm, so every rank clips with the
    norm of the whole model; ``uncounted`` holds the ``id`` of parameters left out of the
    norm but clipped with it (the second copy of a weight two stages share). Collective over
    ``pipeline_group`` even on a rank without gradients.
    """
    params = [p for p in parameters if p.grad is not None]
    counted = [p for p in params if id(p) not in uncounted]
    groups = _by_mesh(counted)
    if not groups:
        total = torch.zeros(())
    elif len(groups) == 1:
        total = _full_norm([p.grad for p in groups[0]])
    else:
        # Gradients on several meshes (expert parallelism: the experts live on the ep mesh,
        # the dense parameters on the data-parallel one): each mesh's norm is reduced over its
        # own ranks, then the squares are added.
        norms = [_full_norm([p.grad for p in group]) for group in groups]
        total = torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]))
    if pipeline_group is not None:
        from hyper_parallel.platform.collectives import all_reduce_sum

        if params:
            total = total.to(_local(params[0].grad).device)
        squares = total.float().square() if total.dtype != torch.float64 else total.square()
        # A stage without gradients adds a host zero: the helper moves it where the backend
        # reduces (NCCL: the GPU), and the norm goes back to the gradients' device.
        total = all_reduce_sum(squares, pipeline_group).sqrt().to(total.device, total.dtype)
    if max_norm > 0 and params:
        for group in _by_mesh(params):  # a multi-tensor op takes tensors of one mesh
            torch.nn.utils.clip_grads_with_norm_(group, max_norm, total, foreach=None)
    return total


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _by_mesh(params: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """``params`` grouped by the device mesh of their gradients (plain tensors form one
    group), in first-seen order."""
    groups: dict[object, list[torch.Tensor]] = {}
    for param in params:
        groups.setdefault(getattr(param.grad, "device_mesh", None), []).append(param)
    return list(groups.values())


def _full_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The L2 norm of ``grads`` (all on one mesh, or plain) as a plain tensor.

    In the gradients' own precision, as torch computes it: the golden losses of the legacy
    runs clip with exactly this norm. (On CPU, float32 sums a large tensor's squares with a
    relative error of a few 1e-6, which is what separates one rank's logged norm from a
    sharded run's; float64 norms of the same gradients agree to 1e-8.)"""
    with _sequential_reductions_meant():
        total = torch.nn.utils.get_total_norm(grads, norm_type=2.0, foreach=None)
        # Lazy: ``torch.distributed.tensor`` is heavy and the config path imports this module;
        # with DTensor gradients it is already loaded, so the import is free here.
        from torch.distributed.tensor import DTensor

        if isinstance(total, DTensor):
            # Sharded grads give a partial norm: full_tensor() reduces it over the mesh.
            total = total.full_tensor()
    return total


class _NoFlattenedMeshAdvice(logging.Filter):
    """Drops DTensor's advice to flatten the mesh for a reduction it performs as several
    sequential collectives, the "2 sequential all_reduce operations" of every FSDP x TP rank's
    first gradient norm (one line per rank: 512 on 512 ranks)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("While redistributing from")


@contextlib.contextmanager
def _sequential_reductions_meant() -> Iterator[None]:
    """The gradient norm's reductions over a 2-D (or deeper) mesh run one axis at a time, on
    purpose: one scalar a step, where a flattened mesh would cost every rank one more
    communicator (an NCCL one holds GPU memory) to save one latency-bound all-reduce. Every
    rank ends with the same norm either way (each all-reduce hands its whole group one
    result), so DTensor's advice is left out of the log for this reduction only. (torch
    advises once per mesh and axes: an advice for the same axes after the first norm is one
    torch would not have logged either.)"""
    logger = logging.getLogger("torch.distributed.tensor._redistribute")
    advice = _NoFlattenedMeshAdvice()
    logger.addFilter(advice)
    try:
        yield
    finally:
        logger.removeFilter(advice)
