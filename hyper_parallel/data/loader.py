"""Per-rank data loading: sampler, collate, resumable loader and gradient-accumulation grouping.

The loader is a ``torchdata`` ``StatefulDataLoader`` over a :class:`ResumableDistributedSampler`
(a ``DistributedSampler``). ``loader.state_dict()`` captures the exact position, including
the sampler's epoch, so ``load_state_dict`` on a freshly built loader continues with the very
next batch an uninterrupted run would have produced, mid-epoch included. A streamed dataset
(an ``IterableDataset``: :mod:`hyper_parallel.data.streaming`) is this rank's share already: it
gets no sampler, shuffles and keeps its position itself, and the loader saves that position.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import Dataset, IterableDataset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

from hyper_parallel.utils.choices import IGNORE_INDEX
from hyper_parallel.utils.data_types import IMAGE_KEYS, IMAGES_PER_ROW, setting_problems
from hyper_parallel.utils.documents import Documents
from hyper_parallel.utils.errors import ConfigError

logger = logging.getLogger(__name__)

# Keys collate knows how to pad, with their pad values; None = the tokenizer pad id.
_PAD_VALUES: dict[str, int | None] = {
    "input_ids": None,
    "labels": IGNORE_INDEX,
    "attention_mask": 0,
    "position_ids": 0,
}


class ResumableDistributedSampler(StatefulDistributedSampler):
    """``DistributedSampler`` whose state also records the epoch and the layout.

    torchdata's ``StatefulDistributedSampler`` saves only how many indices it yielded; the shuffle
    order, however, depends on ``set_epoch``. Saving the epoch makes a resumed loader reproduce
    the interrupted permutation even if the trainer restores its epoch counter later. The layout
    (replicas, rank, seed, shuffle, dataset length) is saved too: a position taken under another
    layout names different samples, so loading it is an error rather than a silent reshuffle.
    """

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(epoch=self.epoch, num_replicas=self.num_replicas, rank=self.rank,
                     seed=self.seed, shuffle=self.shuffle, dataset_len=len(self.dataset))
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        expected = {"num_replicas": (self.num_replicas, "the data-parallel size"),
                    "rank": (self.rank, "the data-parallel rank"),
                    "seed": (self.seed, "train.seed"),
                    "shuffle": (self.shuffle, "data.shuffle"),
                    "dataset_len": (len(self.dataset), (
                        "the dataset: its files, its data settings or the tokenizer, or for "
                        "synthetic dummy data the number of steps, which sizes it"))}
        for key, (current, what) in expected.items():
            if key in state_dict and state_dict[key] != current:
                # The checkpoint does not fit this run's data: the user's setting to fix.
                raise ConfigError(
                    f"cannot resume the data position: it was saved with {key}="
                    f"{state_dict[key]!r} but this run has {current!r} ({what} changed); resume "
                    "with the original settings or start the data from scratch",
                    path="checkpoint.load_path",
                )
        super().load_state_dict(state_dict)
        if "epoch" in state_dict:
            self.set_epoch(state_dict["epoch"])


def collate(batch: list[dict[str, torch.Tensor]], pad_id: int, pad_to_multiple_of: int = 1
            ) -> dict[str, torch.Tensor]:
    """Right-pad 1-D samples to the longest one and stack them.

    ``input_ids`` are padded with ``pad_id``, ``labels`` with -100 (ignored by the loss),
    ``attention_mask`` / ``position_ids`` (optional) with 0. The padded length is the longest
    sample rounded up to a multiple of ``pad_to_multiple_of`` (later legacy snapshots: ``cp * tp``,
    so every batch splits evenly over the sequence-sharded ranks; 1 = no rounding). Use
    ``functools.partial(collate, pad_id=tokenizer.pad_id)`` as a ``collate_fn``.
    """
    if not batch:
        raise ValueError("collate: empty batch")
    if (not isinstance(pad_to_multiple_of, int) or isinstance(pad_to_multiple_of, bool)
            or pad_to_multiple_of < 1):
        raise ValueError(f"collate: pad_to_multiple_of must be a positive int, got "
                         f"{pad_to_multiple_of!r}")
    keys = list(batch[0])
    unknown = [k for k in keys if k not in _PAD_VALUES]
    if unknown or "input_ids" not in keys:
        raise ValueError(f"collate: samples need input_ids and may hold {sorted(_PAD_VALUES)}; "
                         f"got keys {keys}")
    if any(list(sample) != keys for sample in batch):
        raise ValueError("collate: all samples must have the same keys")
    longest = max(sample["input_ids"].shape[0] for sample in batch)
    length = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
    out: dict[str, torch.Tensor] = {}
    for key in keys:
        pad = pad_id if _PAD_VALUES[key] is None else _PAD_VALUES[key]
        first = batch[0][key]
        stacked = torch.full((len(batch), length), pad, dtype=first.dtype)
        for row, sample in enumerate(batch):
            value = sample[key]
            if value.dim() != 1:
                raise ValueError(f"collate: {key} must be 1-D per sample, got {tuple(value.shape)}")
            stacked[row, : value.shape[0]] = value
        out[key] = stacked
    return out


def _pinning(pin_memory: bool) -> bool:
    """Whether batches are pinned: only with an accelerator to copy them to (said in the log
    when asked for on a CPU-only host, so the setting is never silently without effect)."""
    if pin_memory and not torch.accelerator.is_available():
        logger.info("pin_memory: no accelerator on this host, batches stay in pageable memory")
        return False
    return pin_memory


def leave_the_stop_to_the_rank(worker_id: int) -> None:
    """A loader worker's start: it ignores SIGTERM. A scheduler stops a job by signalling every
    process of it (Slurm: each process of the job step, loader workers included), and a worker
    killed by that signal makes its rank's loader raise ("DataLoader worker ... is killed by
    signal: Terminated") in the very step that was to end in the stop's checkpoint. The rank
    stops; its workers end with it (torch's worker loop exits when its rank is gone), and
    SIGKILL still ends them."""
    del worker_id
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def build_dataloader(
    dataset: Dataset,
    *,
    dp_rank: int,
    dp_size: int,
    micro_batch_size: int,
    shuffle: bool = True,
    seed: int = 42,
    num_workers: int = 0,
    pin_memory: bool = True,
    prefetch_factor: int | None = None,
    collate_fn: Callable[[list[Any]], Any] | None = None,
) -> StatefulDataLoader:
    """The per-rank loader (legacy C.5): ``micro_batch_size`` samples per batch, tail dropped.

    Args:
        dp_rank, dp_size: this rank's position in the data-parallel group (ranks sharing a
            ``dp_rank`` -- e.g. TP peers -- get identical batches).
        shuffle, seed: ``data.shuffle`` and ``train.seed``; the order also depends on the epoch,
            so call ``loader.sampler.set_epoch(epoch)`` at the start of every epoch. A dataset
            whose ``data_type`` is replayed in file order (``preset_pt``) refuses
            ``shuffle=True`` (:func:`~hyper_parallel.utils.data_types.setting_problems`).
        num_workers, prefetch_factor: ``data.num_workers``; ``data.prefetch_factor`` is only
            passed when there are workers (torch rejects it otherwise).
        pin_memory: ``data.pin_memory``; pinning needs an accelerator, so on a CPU-only host it
            is not requested (it would be a no-op plus a warning per loader); the log says so.
        collate_fn: default ``partial(collate, pad_id=0)``; pass the tokenizer's pad id.

    An ``IterableDataset`` (a stream, this rank's share of the data) is batched as it comes:
    ``shuffle`` must be False (the stream shuffles itself) and ``dp_rank`` / ``dp_size`` only
    check that a stream with a length holds a batch.

    Raises ``ValueError`` when a rank would get no batch at all (dataset too small).
    """
    if not (isinstance(dp_size, int) and dp_size >= 1 and isinstance(dp_rank, int)
            and 0 <= dp_rank < dp_size):
        raise ValueError(f"dp_rank={dp_rank!r} must lie in [0, dp_size={dp_size!r})")
    if not isinstance(micro_batch_size, int) or micro_batch_size < 1:
        raise ValueError(f"train.micro_batch_size must be a positive int, got {micro_batch_size!r}")
    problems = setting_problems(getattr(dataset, "data_type", None), shuffle=shuffle,
                                fields={"shuffle": "data.shuffle / dataloader.shuffle"})
    if problems:
        raise ValueError(f"{type(dataset).__name__}: {problems[0].message}")
    kwargs: dict[str, Any] = {}
    if num_workers > 0 and prefetch_factor is not None:
        kwargs["prefetch_factor"] = prefetch_factor
    if isinstance(dataset, IterableDataset):
        if shuffle:
            raise ValueError(f"{type(dataset).__name__} is a stream, which shuffles itself; "
                             "build its loader with shuffle=False")
        length = _length(dataset)
        if length is not None and length < micro_batch_size:
            raise ValueError(
                f"the stream yields {length} samples an epoch on this data-parallel rank, fewer "
                f"than train.micro_batch_size={micro_batch_size}, so no batch could be formed; "
                "raise the sample budget (data.train_size) or use a smaller batch")
        sampler = None  # a stream is this rank's share already, in its own order
    else:
        per_rank = len(dataset) // dp_size  # DistributedSampler(drop_last=True)
        if per_rank < micro_batch_size:
            raise ValueError(
                f"the dataset has {len(dataset)} samples: {per_rank} per data-parallel rank "
                f"(dp_size={dp_size}), fewer than train.micro_batch_size={micro_batch_size}, "
                "so no batch could be formed; use more data, a shorter data.max_seq_len or a "
                "smaller batch"
            )
        sampler = ResumableDistributedSampler(dataset, num_replicas=dp_size, rank=dp_rank,
                                              shuffle=shuffle, seed=seed, drop_last=True)
    return StatefulDataLoader(
        dataset,
        batch_size=micro_batch_size,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate_fn or functools.partial(collate, pad_id=0),
        pin_memory=_pinning(pin_memory),
        drop_last=True,
        # Its own generator: without one, every iter(loader) draws the worker base seed from the
        # global RNG, so a resumed run's later random draws would shift.
        generator=torch.Generator().manual_seed(seed),
        worker_init_fn=leave_the_stop_to_the_rank if num_workers > 0 else None,
        **kwargs,
    )


def _length(dataset: IterableDataset) -> int | None:
    """A stream's samples per epoch, None when it has no length."""
    try:
        return len(dataset)  # type: ignore[arg-type]
    except TypeError:
        return None


def grad_accum_steps(global_batch_size: int, micro_batch_size: int, dp_size: int) -> int:
    """Micro-batches per optimizer step: ``global_batch_size / (micro_batch_size * dp_size)``.

    Unlike the legacy floor division, a global batch that is not a multiple of
    ``micro_batch_size * dp_size`` is an error instead of being silently shrunk. The engine
    checks it first, in the user's field names (``ParallelDims.validate_training``); this is the
    arithmetic's own guard.
    """
    for name, value in (("global batch size", global_batch_size),
                        ("micro-batch size", micro_batch_size), ("data-parallel size", dp_size)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"the {name} must be a positive int, got {value!r}")
    per_step = micro_batch_size * dp_size
    if global_batch_size % per_step:
        raise ValueError(
            f"the global batch size {global_batch_size} is not divisible by the micro-batch "
            f"size x the data-parallel size = {micro_batch_size} x {dp_size} = {per_step}"
        )
    return global_batch_size // per_step


def micro_batch_groups(loader_iter: Iterable[Any], grad_accum: int) -> Iterator[list[Any]]:
    """Group consecutive batches into lists of ``grad_accum`` (one list per optimizer step).

    A trailing partial group is still yielded (legacy behaviour: the last step of an epoch
    may have fewer micro-batches; token-weighted loss normalisation copes with that).
    """
    if not isinstance(grad_accum, int) or grad_accum < 1:
        raise ValueError(f"grad_accum must be a positive int, got {grad_accum!r}")
    group: list[Any] = []
    for batch in loader_iter:
        group.append(batch)
        if len(group) == grad_accum:
            yield group
            group = []
    if group:
        yield group


def split_rows(batch: Any, rank: int, parts: int) -> Any:
    """Rows ``[rank * n / parts, (rank + 1) * n / parts)`` of every tensor of ``batch`` (a dict
    of ``[n, ...]`` tensors, as the loaders yield): this rank's share of a batch that ``parts``
    ranks load together and split (expert parallelism). ``n`` must be a multiple of ``parts``
    (``ParallelDims.validate_training`` checks ``training.local_batch_size``)."""
    if isinstance(batch, dict):
        if IMAGES_PER_ROW in batch:
            return _split_image_rows(batch, rank, parts)
        return {k: split_rows(v, rank, parts) for k, v in batch.items()}
    rows = batch.shape[0]
    if rows % parts:
        raise ValueError(f"a batch of {rows} rows cannot be split over {parts} ranks")
    size = rows // parts
    return batch[rank * size:(rank + 1) * size]


def _split_image_rows(batch: dict, rank: int, parts: int) -> dict:
    """:func:`split_rows` of an image-text batch: the rows, and the images those rows hold
    (``images_per_row``; their ``pixel_values`` rows by the grids' patch counts). A share
    whose rows hold no image has no image keys."""
    rows = batch["input_ids"].shape[0]
    if rows % parts:
        raise ValueError(f"a batch of {rows} rows cannot be split over {parts} ranks")
    size = rows // parts
    start, stop = rank * size, (rank + 1) * size
    counts = [0, *torch.cumsum(batch[IMAGES_PER_ROW], 0).tolist()]
    first, last = counts[start], counts[stop]
    patches = [0, *torch.cumsum(batch["image_grid_thw"].prod(-1), 0).tolist()]
    out = {}
    for key, value in batch.items():
        if key == "image_grid_thw":
            out[key] = value[first:last]
        elif key == "pixel_values":
            out[key] = value[patches[first]:patches[last]]
        elif key == "position_ids" and value.dim() == 3:  # (3, B, S): rows are dim 1
            out[key] = value[:, start:stop]
        else:
            out[key] = value[start:stop]
    if first == last:
        for key in (*IMAGE_KEYS, IMAGES_PER_ROW):
            out.pop(key)
    return out


def split_sequence(batch: dict, rank: int, parts: int) -> dict:
    """This rank's contiguous ``1/parts`` of every sequence of ``batch`` (context parallelism):
    positions ``[rank * S / parts, (rank + 1) * S / parts)`` of ``input_ids`` and of the other
    ``[n, S]`` tensors, with ``position_ids`` (the global positions, made when the batch has
    none) so the rotary embedding sees where the shard sits.

    ``labels`` are shifted before the split: the shard keeps one label more than its inputs
    (the next shard's first), so position ``t``'s target is ``labels[t + 1]`` on every rank and
    the loss, which aligns targets to the logits, needs no other change; the last shard has
    none past the end, as on one rank. A packed batch's documents (made from the whole rows'
    ``position_ids`` before the split) become this shard's
    (:class:`~hyper_parallel.utils.documents.DocumentShard`). ``S`` must be a multiple of ``parts``
    (``ParallelDims.validate_training`` and the collate's padding see to it)."""
    length = batch["input_ids"].shape[1]
    if length % parts:
        raise ValueError(f"a sequence of {length} positions cannot be split over {parts} ranks")
    size = length // parts
    start, stop = rank * size, (rank + 1) * size
    out = {}
    for key, value in batch.items():
        if key == "labels":
            out[key] = value[:, start:stop + 1]
        elif isinstance(value, torch.Tensor) and value.dim() >= 2 and value.shape[-1] == length:
            out[key] = value[..., start:stop]
        elif isinstance(value, Documents):  # made from the whole rows: a shard cannot tell
            out[key] = value.shard(rank, parts)
        else:
            out[key] = value
    if "position_ids" not in out:
        positions = torch.arange(start, stop, device=batch["input_ids"].device)
        out["position_ids"] = positions.unsqueeze(0).expand(batch["input_ids"].shape[0], -1)
    return out

