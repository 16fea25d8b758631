"""One optimizer step, and one evaluation pass, through a pipeline schedule.

The step of :mod:`hyper_parallel.runtime.step` with the forward and backward driven by a
``torch.distributed.pipelining`` schedule (:class:`hyper_parallel.models.pipelining.Pipeline`):

* the step's accumulation micro-batches are concatenated (rows) and the schedule splits them
  into ``num_pp_microbatches`` pipeline micro-batches; with as many as there are accumulation
  micro-batches, those are the same rows as without pipelining;
* the loss is computed on the last stage by :class:`PipelineLoss`, per micro-batch, already
  scaled as the step scales it without pipelining (the per-token loss over the global token
  count, times the data-parallel size FSDP averages over), *before* the schedule's backward:
  the schedule is built with ``scale_grads=False`` (torchtitan's way: dividing after the step
  would fix only the logged value);
* a tied weight's copies have their gradients summed, the gradient norm is reduced over the
  pipeline ranks too, and every rank logs the same loss (reduced over data-parallel and
  pipeline ranks), which means what it means without pipelining;
* a ``block_causal`` model's documents (``model.attn_mask_type``) are made once a step, on the
  host, from the step's rows' ``position_ids`` (:func:`with_step_documents`); the schedule cuts
  them with the rows, so each pipeline micro-batch carries its own
  :class:`~hyper_parallel.utils.documents.Documents`, which every stage's forward reads (a
  keyword argument reaches every stage; a later stage has no ``position_ids`` it could read
  without asking the device). Under context parallelism too each rank's rows are its shard
  of the whole rows, whose documents the trainer made before the split
  (:class:`~hyper_parallel.utils.documents.DocumentShard`): the step concatenates the
  micro-batches' whole rows' documents and the schedule cuts them along the rows as it cuts
  the shard's rows, so each pipeline micro-batch carries its rows' shard of their documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch.utils import _pytree as pytree

from hyper_parallel.platform.collectives import all_reduce_sum, or_alone, sum_counts
from hyper_parallel.runtime.loss import LossScaler
from hyper_parallel.runtime.optim import clip_grad_norm_
from hyper_parallel.runtime.step import DOCUMENTS, StepResult, image_inputs, move_to_device
from hyper_parallel.utils.choices import IGNORE_INDEX
from hyper_parallel.utils.data_types import IMAGE_KEYS, IMAGES_PER_ROW
from hyper_parallel.utils.documents import Documents, DocumentShard


@dataclass
class PipelineLoss:
    """The schedule's loss function: ``(logits, labels) -> the tensor to backpropagate`` for one
    pipeline micro-batch, called on the last stage in micro-batch order.

    :meth:`begin_step` gives it the step's scaler and the micro-batches' token counts; it adds
    each micro-batch's share of the reported loss to :attr:`report`. In evaluation
    (:meth:`begin_eval`) it sums the unscaled loss and the tokens instead."""

    loss_fn: Any
    """The run's loss (``loss_sum(logits, labels)``: a :class:`~hyper_parallel.runtime.step.
    TokenLoss`)."""
    scaler: LossScaler | None = None
    tokens: list[int] = field(default_factory=list)
    index: int = 0
    report: torch.Tensor | None = None
    totals: torch.Tensor | None = None
    """Evaluation: ``[loss sum, tokens]`` (float64) while evaluating, else None."""
    inferring_shapes: bool = False
    """The next call is the schedule's shape inference (see :func:`pipeline_train_step`)."""

    def begin_step(self, scaler: LossScaler, tokens: list[int], device: torch.device) -> None:
        self.scaler, self.tokens, self.index = scaler, tokens, 0
        self.report = torch.zeros((), dtype=torch.float32, device=device)
        self.totals = None

    def begin_eval(self, device: torch.device) -> None:
        self.totals = torch.zeros(2, dtype=torch.float64, device=device)

    def __call__(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss_sum, counted = self.loss_fn.loss_sum(logits, labels)
        if self.inferring_shapes:
            # The schedule's first step runs the last stage and its loss once on placeholder
            # inputs to learn the gradient shapes, before the first micro-batch.
            self.inferring_shapes = False
            return loss_sum
        if self.totals is not None:
            self.totals[0] += loss_sum.detach().double()
            self.totals[1] += counted
            return loss_sum
        tokens = self.tokens[self.index]
        self.index += 1
        self.report += self.scaler.local_report(loss_sum, tokens)
        return self.scaler.backward_loss(loss_sum, tokens)


def concat_micro_batches(micro_batches: Sequence[dict], seq_len: int | None = None) -> dict:
    """The rows of ``micro_batches`` as one batch (their order kept).

    Rows shorter than ``seq_len`` (variable-length data) are padded to it -- token id 0, label
    ``IGNORE_INDEX`` -- because a pipeline stage fixes its activation shapes at the first step;
    with causal layers the padding changes no real token's output."""
    keys = micro_batches[0].keys()
    out = {}
    for key in keys:
        parts = [mb[key] for mb in micro_batches]
        if isinstance(parts[0], DocumentShard):  # a context-parallel shard's (the trainer's)
            out[key] = _concat_shards(parts)
            continue
        if not isinstance(parts[0], torch.Tensor):
            raise TypeError(f"pipeline batches hold tensors only; {key!r} is {type(parts[0])}")
        target = seq_len if seq_len is not None else max(p.shape[1] for p in parts)
        fill = IGNORE_INDEX if key == "labels" else 0
        parts = [_pad_columns(p, target, fill) for p in parts]
        out[key] = torch.cat(parts, dim=0)
    return out


def _pad_columns(tensor: torch.Tensor, length: int, value: int) -> torch.Tensor:
    if tensor.dim() < 2 or tensor.shape[1] >= length:
        return tensor
    pad = tensor.new_full((tensor.shape[0], length - tensor.shape[1], *tensor.shape[2:]), value)
    return torch.cat([tensor, pad], dim=1)


def pad_sequence(batch: dict, length: int) -> dict:
    """``batch`` with every tensor along its rows' positions (``(..., S)``: tokens, labels,
    positions) padded at the end to ``length`` (token 0, label ``IGNORE_INDEX``, position 0),
    for a pipeline under context parallelism: the stages fix their shapes, and the whole rows
    are padded before they are split into shards, so the padding ends each row (padding a
    shard's end would put it inside the row, before the next shard's tokens)."""
    seq = batch["input_ids"].shape[1]
    if seq >= length:
        return batch
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[-1] == seq:
            fill = IGNORE_INDEX if key == "labels" else 0
            value = torch.nn.functional.pad(value, (0, length - seq), value=fill)
        out[key] = value
    return out


def _concat_shards(shards: Sequence[DocumentShard]) -> DocumentShard:
    """The shards of the whole rows' documents of several micro-batches as one shard of their
    rows (their order kept): the whole rows' starts concatenated, so the schedule's cut along
    the rows (below) hands each pipeline micro-batch its rows' shard. The trainer pads the
    whole rows to the run's length before the split, so the whole rows are one length."""
    first = shards[0]
    if any((s.rank, s.parts, s.whole.shape[1]) != (first.rank, first.parts, first.whole.shape[1])
           for s in shards):
        raise ValueError("the micro-batches' document shards are not of the same rows' split: "
                         f"{[repr(s) for s in shards]}")
    starts = torch.cat([s.whole.starts.cpu() for s in shards], dim=0)
    return DocumentShard(Documents.from_starts(starts), first.rank, first.parts)


def _pad_rows(batch: dict, rows: int) -> dict:
    """``batch`` with rows appended up to ``rows`` that contribute nothing (ignored labels)."""
    have = batch["labels"].shape[0]
    if have >= rows:
        return batch
    out = {}
    for key, value in batch.items():
        if isinstance(value, DocumentShard):  # the padded rows' documents: as their positions
            starts = value.whole.starts.cpu()
            pad = starts[:1].expand(rows - have, -1)
            whole = Documents.from_starts(torch.cat([starts, pad], dim=0))
            out[key] = DocumentShard(whole, value.rank, value.parts)
            continue
        fill = IGNORE_INDEX if key == "labels" else 0
        pad = value.new_full((rows - have, *value.shape[1:]), fill)
        if key == "position_ids":
            pad = value[:1].expand(rows - have, *value.shape[1:]).clone()
        out[key] = torch.cat([value, pad], dim=0)
    return out


def with_row_images(micro_batches: Sequence[dict], seq_len: int | None = None) -> dict:
    """:func:`concat_micro_batches`, for image-text micro-batches too: the schedule cuts every
    input along its first dimension, so the images are made row-aligned
    (:func:`~hyper_parallel.models.qwen3_5.vision_positions.row_images`: ``pixel_values``
    ``(B, P, D)``, ``image_grid_thw`` ``(B, I, 3)``, ``position_ids`` ``(B, 3, S)``), rows
    without an image padded, and the first stage's model unpacks its micro-batch's."""
    if not any("image_grid_thw" in mb for mb in micro_batches):
        return concat_micro_batches(micro_batches, seq_len)
    from hyper_parallel.models.qwen3_5.vision_positions import row_images

    # The images are not row-aligned (IMAGES_PER_ROW says whose they are); the rest is.
    text = [{k: v for k, v in mb.items()
             if k not in (*IMAGE_KEYS, IMAGES_PER_ROW, "position_ids")}
            for mb in micro_batches]
    batch = concat_micro_batches(text, seq_len)
    length = batch["input_ids"].shape[1]
    rows = []
    for mb in micro_batches:
        n, seq = mb["input_ids"].shape
        positions = mb.get("position_ids")
        if positions is None:
            positions = torch.arange(seq).expand(3, n, seq)
        if positions.shape[-1] < length:  # padded rows (variable-length data): position 0
            positions = torch.nn.functional.pad(positions, (0, length - positions.shape[-1]))
        counts = mb.get(IMAGES_PER_ROW, torch.zeros(n, dtype=torch.long)).tolist()
        grids = mb.get("image_grid_thw")
        patches = [0] if grids is None else [0, *torch.cumsum(grids.prod(-1), 0).tolist()]
        first = 0
        for r, count in enumerate(counts):
            if not count:
                rows.append((None, None, positions[:, r]))
                continue
            grid = grids[first:first + count]
            pixels = mb["pixel_values"][patches[first]:patches[first + count]]
            rows.append((pixels, grid, positions[:, r]))
            first += count
    batch["pixel_values"], batch["image_grid_thw"], batch["position_ids"] = row_images(rows)
    return batch


# ---------------------------------------------------------------- the documents of the rows
def _flatten_documents(documents: Documents) -> tuple[list[Any], None]:
    return [documents.starts], None


def _unflatten_documents(children: list[Any], _context: None) -> Documents:
    starts = children[0]
    if isinstance(starts, torch.Tensor):
        return Documents.from_starts(starts)
    # The same structure around another leaf (the schedule's chunk spec of ``starts``): a
    # shell that is only flattened again.
    shell = Documents.__new__(Documents)
    shell.starts = starts
    return shell


# A schedule cuts every input of the step into its micro-batches along the rows, with torch's
# pytree (``split_args_kwargs_into_chunks``): as a node over its ``(B, S)`` starts, the
# documents of the step's rows are cut with them, and each micro-batch's are rebuilt from its
# rows' starts, on the host (its offsets and longest document are its own). FSDP's root
# pre-forward does not walk pytree nodes: the documents reach the model as they are.
pytree.register_pytree_node(
    Documents,
    _flatten_documents,
    _unflatten_documents,
    serialized_type_name="hyper_parallel.utils.documents.Documents",
)


def _flatten_shard(shard: DocumentShard) -> tuple[list[Any], tuple[int, int]]:
    return [shard.whole.starts], (shard.rank, shard.parts)


def _unflatten_shard(children: list[Any], context: tuple[int, int]) -> DocumentShard:
    starts = children[0]
    rank, parts = context
    if isinstance(starts, torch.Tensor):
        return DocumentShard(Documents.from_starts(starts), rank, parts)
    shell = DocumentShard.__new__(DocumentShard)
    shell.whole = _unflatten_documents([starts], None)
    shell.rank, shell.parts = rank, parts
    return shell


# Under context parallelism a micro-batch's rows are this rank's shard of the whole rows, and
# its documents the shard of the whole rows' (made before the split): a node over the whole
# rows' ``(B, S)`` starts, cut along the rows like the shard's own ``(B, S / cp)`` tokens, so
# each pipeline micro-batch's shard is rebuilt (on the host) from the same rows' whole starts,
# the same positions of them as its tokens.
pytree.register_pytree_node(
    DocumentShard,
    _flatten_shard,
    _unflatten_shard,
    serialized_type_name="hyper_parallel.utils.documents.DocumentShard",
)


def with_step_documents(pipeline: Any, batch: dict) -> dict:
    """``batch`` (the step's host rows, :func:`with_row_images`) with the documents of its rows
    under :data:`~hyper_parallel.runtime.step.DOCUMENTS` when the stages keep documents apart
    (``reads_documents``: ``attn_mask_type: block_causal``), made here from the host
    ``position_ids`` (an image-text batch's are row-aligned, ``(B, 3, S)``); else ``batch``
    itself. The schedule gives each micro-batch the documents of its rows (above). Under
    context parallelism the batch holds them already: the shard of the whole rows' (a shard's
    own positions cannot tell where its documents begin), concatenated with the rows."""
    if (not getattr(pipeline.parts[0], "reads_documents", False) or "position_ids" not in batch
            or DOCUMENTS in batch):
        return batch
    positions = batch["position_ids"]
    if positions.dim() == 3:  # (B, 3, S), row-aligned for the schedule (with_row_images)
        positions = positions.movedim(1, 0)
    return {**batch, DOCUMENTS: Documents.from_positions(positions)}


def _run_schedule(pipeline: Any, batch: dict, *, train: bool) -> None:
    args = (batch["input_ids"],) if pipeline.has_first_stage else ()
    # The grids travel as a HostTensor (image_inputs): the schedule cuts it with the rest, and
    # the stage's FSDP root pre-forward leaves it on the host; the documents are cut likewise.
    kwargs = {k: batch[k] for k in ("position_ids", DOCUMENTS) if k in batch}
    kwargs |= image_inputs(batch)
    target = batch["labels"] if pipeline.has_last_stage else None
    losses: list | None = [] if pipeline.has_last_stage else None
    run = pipeline.schedule.step if train else pipeline.schedule.eval
    run(*args, target=target, losses=losses, **kwargs)


def pipeline_train_step(
    pipeline: Any,
    optimizer: Any,
    lr_scheduler: Any,
    micro_batches: Sequence[dict],
    *,
    loss: PipelineLoss,
    device: torch.device,
    dp_group: dist.ProcessGroup | None,
    dp_size: int,
    max_grad_norm: float,
    seq_len: int | None = None,
    split_group: dist.ProcessGroup | None = None,
    on_substep_end: Callable[[], None] = lambda: None,
    on_pre_optimizer_step: Callable[[float], None] = lambda grad_norm: None,
) -> StepResult:
    """Forward and backward of the step's rows through ``pipeline.schedule``, clip over every
    stage, optimizer step (see the module docstring); the arguments mean what they mean for
    :func:`hyper_parallel.runtime.step.train_step`."""
    host_batch = with_step_documents(pipeline, with_row_images(micro_batches, seq_len))
    m = pipeline.num_microbatches
    # Counted on the host rows, before they move: on a GPU a count of device labels is a read
    # that waits for the device's queue, twice a step.
    chunks = torch.tensor_split(host_batch["labels"], m, dim=0)
    tokens = [loss.loss_fn.count_tokens(chunk) for chunk in chunks]
    batch = move_to_device(host_batch, device)
    global_tokens = sum_counts([sum(tokens)], or_alone(dp_group))[0]
    split = 1 if split_group is None else dist.get_world_size(split_group)
    if split > 1:
        tokens = sum_counts(tokens, split_group)
    scaler = loss.loss_fn.scaler(
        global_tokens=global_tokens, num_micro_batches=m, dp_size=dp_size, split=split
    )
    loss.begin_step(scaler, tokens, device)
    loss.inferring_shapes = pipeline.has_last_stage and not pipeline.shapes_inferred()
    _run_schedule(pipeline, batch, train=True)
    for _ in range(m):
        on_substep_end()
    if pipeline.tied is not None:
        pipeline.tied.sum_grads()
    params = [p for part in pipeline.parts for p in part.parameters()]
    grad_norm = float(
        clip_grad_norm_(
            params,
            max_grad_norm,
            pipeline_group=pipeline.group,
            uncounted=pipeline.grad_norm_exclusions(),
        )
    )
    on_pre_optimizer_step(grad_norm)
    optimizer.step()
    lr_scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    report = all_reduce_sum(loss.report, or_alone(dp_group))
    report = all_reduce_sum(report, pipeline.group)  # only the last stage holds a loss
    return StepResult(loss=float(report.item()), grad_norm=grad_norm, global_tokens=global_tokens)


@torch.no_grad()
def pipeline_evaluate(
    pipeline: Any,
    batches: Any,
    *,
    loss: PipelineLoss,
    device: torch.device,
    dp_group: dist.ProcessGroup | None,
    rows_per_step: int,
    seq_len: int | None = None,
) -> float:
    """Token-weighted mean validation loss, forward only through the schedule: the batches are
    grouped ``rows_per_step`` rows at a time, as in training (the stages' shapes), a short last
    group padded with rows that count no token."""
    for part in pipeline.parts:
        part.eval()
    loss.begin_eval(device)
    try:
        group: list[dict] = []
        rows = 0
        for batch in batches:
            group.append(batch)
            rows += batch["labels"].shape[0]
            if rows >= rows_per_step:
                _eval_group(pipeline, group, rows_per_step, seq_len, device)
                group, rows = [], 0
        if group:
            _eval_group(pipeline, group, rows_per_step, seq_len, device)
        totals = loss.totals
    finally:
        loss.totals = None
        for part in pipeline.parts:
            part.train()
    totals = all_reduce_sum(totals, or_alone(dp_group))
    totals = all_reduce_sum(totals, pipeline.group)
    if totals[1] == 0:
        raise ValueError("the evaluation data has no label tokens (validation.dataset_path)")
    return float(totals[0] / totals[1])


def _eval_group(pipeline: Any, group: list[dict], rows: int, seq_len: int | None,
                device: torch.device) -> None:
    batch = with_step_documents(pipeline, _pad_rows(with_row_images(group, seq_len), rows))
    _run_schedule(pipeline, move_to_device(batch, device), train=False)


__all__ = [
    "PipelineLoss",
    "concat_micro_batches",
    "pad_sequence",
    "pipeline_evaluate",
    "pipeline_train_step",
    "with_step_documents",
]
