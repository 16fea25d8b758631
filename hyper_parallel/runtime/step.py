"""One optimizer step and one evaluation pass, shared by every trainer."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Protocol, Sequence

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule

from hyper_parallel.platform.collectives import all_reduce_sum, or_alone, sum_counts
from hyper_parallel.runtime.loss import LossScaler, count_tokens, token_loss_sum
from hyper_parallel.runtime.optim import clip_grad_norm_
from hyper_parallel.utils.data_types import IMAGE_KEYS, IMAGES_PER_ROW
from hyper_parallel.utils.documents import Documents
from hyper_parallel.utils.host_data import HostTensor


class TokenLoss(Protocol):
    """A pluggable loss for :func:`train_step` / :func:`evaluate` (e.g.
    :class:`hyper_parallel.components.loss.CrossEntropyLoss`).

    Without one, both functions call the helpers of :mod:`hyper_parallel.runtime.loss`
    directly with the legacy ``loss_aggregation`` string; a ``TokenLoss`` lets a trainer swap
    the loss while the step keeps its token accounting.
    """

    aggregation: str
    """``token_weighted`` or ``rank_average`` (see :class:`LossScaler`)."""

    def loss_sum(
        self, logits: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(sum of token losses in fp32, counted tokens)`` of one micro-batch."""
        ...

    def count_tokens(self, labels: torch.Tensor) -> int:
        """Tokens of ``labels`` that contribute to the loss."""
        ...

    def scaler(
        self, *, global_tokens: int, num_micro_batches: int, dp_size: int, split: int = 1
    ) -> LossScaler:
        """How one step turns micro-batch loss sums into the tensor to backpropagate."""
        ...


@dataclass
class StepResult:
    loss: float
    """The step's loss, aggregated over micro-batches and data-parallel ranks."""
    grad_norm: float
    """Global gradient norm before clipping."""
    global_tokens: int
    """Label tokens of the step over all data-parallel ranks."""
    aux_loss: Optional[float] = None
    """The model's auxiliary loss (mixture-of-experts load balancing), averaged over the
    micro-batches and the ranks; None when the model adds none."""


#: Batch keys that stay on the host: the images' patch grids, which the vision tower reads
#: as Python ints (on a GPU every read of a device tensor would wait for the device's queue),
#: and how many images each row holds (read by a split of the rows).
HOST_KEYS = ("image_grid_thw", IMAGES_PER_ROW)


def move_to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: v if k in HOST_KEYS else move_to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to_device(v, device) for v in batch)
    return batch


def image_inputs(batch: dict) -> dict:
    """The batch's images as the model takes them: ``pixel_values`` as moved, and the host
    keys' tensors in a :class:`~hyper_parallel.utils.host_data.HostTensor`, which FSDP2's root
    pre-forward leaves on the host (it moves every bare tensor of the forward's arguments to
    the device) and a pipeline schedule still cuts into micro-batches."""
    return {key: HostTensor.of(batch[key]) if key in HOST_KEYS else batch[key]
            for key in IMAGE_KEYS if key in batch}


#: The batch key of a packed batch's document boundaries (:func:`with_documents`).
DOCUMENTS = "documents"


def with_documents(model: torch.nn.Module, batch: dict) -> dict:
    """``batch`` with its documents (:class:`~hyper_parallel.utils.documents.Documents`, under
    :data:`DOCUMENTS`), made from its ``position_ids`` while they are on the host, when the
    model keeps documents apart (``reads_documents``: ``attn_mask_type: block_causal``); else
    ``batch`` itself. Once per micro-batch, before the batch moves: no kernel then asks the
    device where a document starts."""
    if (not getattr(model, "reads_documents", False) or "position_ids" not in batch
            or DOCUMENTS in batch):
        return batch
    return {**batch, DOCUMENTS: Documents.from_positions(batch["position_ids"])}


def forward_logits(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    documents = {DOCUMENTS: batch[DOCUMENTS]} if DOCUMENTS in batch else {}
    return model(batch["input_ids"], position_ids=batch.get("position_ids"),
                 **image_inputs(batch), **documents)


def _loss_functions(
    loss_fn: Optional[TokenLoss], loss_aggregation: Optional[str]
) -> tuple[Callable[..., tuple[torch.Tensor, torch.Tensor]], Callable[[torch.Tensor], int]]:
    """``(loss_sum, count_tokens)`` of ``loss_fn``, or the legacy helpers when it is None."""
    if loss_fn is None:
        if loss_aggregation is None:
            raise TypeError("train_step needs loss_aggregation (or a loss_fn)")
        return token_loss_sum, count_tokens
    if loss_aggregation is not None and loss_aggregation != loss_fn.aggregation:
        raise ValueError(
            f"train_step: loss_aggregation={loss_aggregation!r} contradicts the loss's "
            f"aggregation={loss_fn.aggregation!r}; pass only the loss (or make them agree)"
        )
    return loss_fn.loss_sum, loss_fn.count_tokens


def train_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    lr_scheduler: Any,
    micro_batches: Sequence[dict],
    *,
    device: torch.device,
    loss_aggregation: Optional[str] = None,
    dp_group: Optional[dist.ProcessGroup],
    dp_size: int,
    max_grad_norm: float,
    loss_fn: Optional[TokenLoss] = None,
    clip_fn: Callable[[Iterable[torch.nn.Parameter], float], torch.Tensor] = clip_grad_norm_,
    backward_context: Callable[[], Any] = contextlib.nullcontext,
    on_substep_end: Callable[[], None] = lambda: None,
    on_pre_optimizer_step: Callable[[float], None] = lambda grad_norm: None,
    split_group: Optional[dist.ProcessGroup] = None,
    auxiliary_loss: Optional[Callable[[], Optional[torch.Tensor]]] = None,
    defer_gradient_sync: bool = False,
) -> StepResult:
    """Forward/backward over ``micro_batches`` (gradient accumulation), clip, optimizer step.

    The loss is either the legacy ``loss_aggregation`` string (the helpers of
    :mod:`hyper_parallel.runtime.loss` are called directly) or a ``loss_fn`` (:class:`TokenLoss`)
    that carries its own aggregation; ``loss_aggregation`` may then be omitted, and must agree
    with ``loss_fn.aggregation`` when given.

    ``split_group``: the ranks that share one data-parallel rank's batch, each with its own rows
    (expert parallelism); their micro-batch token counts are summed for the loss's aggregation.
    ``dp_size`` then counts them too (FSDP averages over them).

    ``auxiliary_loss``: called after each micro-batch's forward, it returns the model's own loss
    term (already weighted; mixture-of-experts load balancing) or None. Each micro-batch adds it
    divided by the number of micro-batches, so the step's objective is the token loss plus the
    term's mean over micro-batches and ranks; it is reported apart from the token loss.

    ``defer_gradient_sync`` (``parallelism.fsdp_defer_gradient_sync``): an FSDP model holds
    every unit's unsharded gradients across the micro-batches and reduce-scatters once, on the
    last; by default each micro-batch's backward reduce-scatters, so the accumulated gradients
    stay sharded (see :func:`defers_gradient_sync`).
    """
    loss_sum_fn, count_fn = _loss_functions(loss_fn, loss_aggregation)
    tokens = [count_fn(mb["labels"]) for mb in micro_batches]
    global_tokens = sum_counts([sum(tokens)], or_alone(dp_group))[0]
    split = 1 if split_group is None else dist.get_world_size(split_group)
    if split > 1:
        # The rows of one batch are spread over the split ranks: its micro-batch token counts
        # are theirs summed (one all-reduce for every micro-batch of the step).
        tokens = sum_counts(tokens, split_group)
    num_mb = len(micro_batches)
    if loss_fn is None:
        scaler = LossScaler(loss_aggregation, global_tokens, num_mb, dp_size, split)
    else:
        scaler = loss_fn.scaler(
            global_tokens=global_tokens, num_micro_batches=num_mb, dp_size=dp_size, split=split
        )
    defer = defers_gradient_sync(model, num_mb, defer_gradient_sync)
    report = torch.zeros((), dtype=torch.float32, device=device)
    aux_report: Optional[torch.Tensor] = None
    last = num_mb - 1
    for i, (mb, mb_tokens) in enumerate(zip(micro_batches, tokens)):
        if defer:
            # The opt-in: no reduce-scatter before the last micro-batch, so FSDP keeps every
            # unit's unsharded gradient (in its reduce dtype) from here to the last backward.
            model.set_requires_gradient_sync(i == last)
        mb = move_to_device(with_documents(model, mb), device)
        loss_sum, _ = loss_sum_fn(forward_logits(model, mb), mb["labels"])
        objective = scaler.backward_loss(loss_sum, mb_tokens)
        aux = auxiliary_loss() if auxiliary_loss is not None else None
        if aux is not None:
            # FSDP averages over the ranks; dividing by the micro-batches makes it a mean.
            objective = objective + aux / num_mb
            share = aux.detach().float() / num_mb / max(dp_size, 1)
            aux_report = share if aux_report is None else aux_report + share
        with backward_context():
            objective.backward()
        report += scaler.local_report(loss_sum, mb_tokens)
        on_substep_end()
    grad_norm = float(clip_fn(model.parameters(), max_grad_norm))
    on_pre_optimizer_step(grad_norm)
    optimizer.step()
    lr_scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    if aux_report is not None:
        report = torch.stack([report, aux_report.to(report.device)])
    reduced = all_reduce_sum(report, or_alone(dp_group))
    loss = float(reduced.reshape(-1)[0].item())
    aux_loss = float(reduced[1].item()) if aux_report is not None else None
    return StepResult(
        loss=loss, grad_norm=grad_norm, global_tokens=global_tokens, aux_loss=aux_loss
    )


def defers_gradient_sync(model: torch.nn.Module, num_micro_batches: int, opted_in: bool) -> bool:
    """Whether a step of ``num_micro_batches`` holds FSDP's gradients unsharded until its last
    micro-batch: only when opted in (``parallelism.fsdp_defer_gradient_sync``), under FSDP, with
    more than one micro-batch.

    Off (the default, torchtitan's choice), every micro-batch's backward reduce-scatters: the
    accumulated gradients are the sharded ones the rank holds anyway, at the price of one
    reduce-scatter per micro-batch. On, one reduce-scatter per step, but from the first
    backward to the last every FSDP unit's unsharded gradients stay allocated in the reduce
    dtype (fp32 by default: 4 bytes per parameter of the rank's model before FSDP splits it,
    33.4 GiB for a 9B model), as much as its sharded fp32 parameters, gradients and AdamW
    state together on 4 FSDP ranks, and more on more. The two sum the same gradients in
    another order (the layouts agree with one rank within their stated bounds either way)."""
    return opted_in and num_micro_batches > 1 and isinstance(model, FSDPModule)


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    batches: Iterable[dict],
    *,
    device: torch.device,
    dp_group: Optional[dist.ProcessGroup],
    loss_fn: Optional[TokenLoss] = None,
) -> float:
    """Token-weighted mean loss over ``batches`` (this rank's share), reduced over DP ranks.

    ``loss_fn`` (a :class:`TokenLoss`) replaces the default next-token cross-entropy.
    """
    loss_sum_fn = token_loss_sum if loss_fn is None else loss_fn.loss_sum
    was_training = model.training
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=device)
    try:
        for batch in batches:
            batch = move_to_device(with_documents(model, batch), device)
            loss_sum, n_tokens = loss_sum_fn(forward_logits(model, batch), batch["labels"])
            totals[0] += loss_sum.double()
            totals[1] += n_tokens
    finally:
        model.train(was_training)
    totals = all_reduce_sum(totals, or_alone(dp_group))
    if totals[1] == 0:
        raise ValueError("the evaluation data has no label tokens (validation.dataset_path)")
    return float(totals[0] / totals[1])
