"""Restoring one checkpoint: :func:`load_checkpoint`."""

from __future__ import annotations

import logging
import os
from typing import Any

import torch

from .async_writer import wait_async_save
from .dcp_io import _dcp_checkpoint_exception, _dcp_load, _dcp_state, _restore_dcp_state
from .errors import LEGACY_LOAD_PATH_FIELD, LOAD_PATH_FIELD, CheckpointError, _reason
from .extra_state import set_rng_state
from .integrity import (
    _agree_on_error,
    _damaged,
    _earlier_checkpoint_hint,
    _first_failure,
    _load_small_file,
    _shard_errors,
    read_extra_state,
)
from .layout import (
    DCP_METADATA_FILE,
    EXTRA_STATE_FILE,
    SCHEDULER_FILE,
    dataloader_file,
    is_complete_checkpoint,
    rng_file,
)
from .ranks import _rank, _world_size

logger = logging.getLogger(__name__)


#: The ``extra_state.json`` entry of the data-parallel layout a checkpoint was saved on:
#: ``{"size": data-parallel size, "ranks": [the data-parallel rank of each global rank]}``.
DATA_RANKS_KEY = "data_parallel"


def _rank_with_same_data(extra: dict, data_rank: tuple[int, int] | None) -> int | None:
    """A saved rank that read the data this rank reads (the same data-parallel rank of the
    same data-parallel size), or None when the layouts do not say or differ."""
    saved = extra.get(DATA_RANKS_KEY)
    if data_rank is None or not saved or saved.get("size") != data_rank[1]:
        return None
    ranks = saved.get("ranks", [])
    return ranks.index(data_rank[0]) if data_rank[0] in ranks else None


def load_checkpoint(
    path: str,
    *,
    model: torch.nn.Module | list[torch.nn.Module],
    optimizer: Any | None,
    lr_scheduler,
    dataloader,
    field: str = LOAD_PATH_FIELD,
    legacy_field: str | None = LEGACY_LOAD_PATH_FIELD,
    data_rank: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Restore everything ``save_checkpoint`` wrote into ``path``; return ``extra_state.json``.

    ``data_rank``: ``(rank, size)`` of this process in the data-parallel group; with the saved
    data-parallel size (recorded under :data:`DATA_RANKS_KEY`), a run of another world size
    (another pipeline or tensor degree) takes each rank's data position from a saved rank of
    the same data-parallel rank, and the resume is exact.

    Collective. The model/optimizer may be sharded differently than at save time (DCP reshards).
    RNG and data-loader positions are per rank: with the saved world size they are restored; with a
    different one a ``dataloader`` cannot be restored (CheckpointError - an exact resume is
    impossible), and for a weights/optimizer-only load (``dataloader=None``) the RNG states are
    left as they are, with a warning. A missing or incomplete directory is a
    :class:`CheckpointError` - never a silent fresh start.

    A damaged checkpoint is a :class:`CheckpointError` on every rank naming the directory, the
    file (``extra_state.json``, ``.metadata``, a ``.distcp`` shard that is missing, shorter than
    ``.metadata`` says or unreadable, ``scheduler.pt``, ``dataloader_rank<r>.pt``,
    ``rng_rank<r>.pt``) and the newest earlier complete checkpoint with the setting
    (``field`` / ``legacy_field``) that loads it. The cheap checks and the small files come
    before anything is restored (see :mod:`.integrity`).
    """
    wait_async_save()
    if not os.path.isdir(path):
        raise CheckpointError(f"checkpoint directory {path!r} does not exist")
    if not is_complete_checkpoint(path):
        raise CheckpointError(
            f"{path!r} is not a complete checkpoint (expected a step_<N> directory with {EXTRA_STATE_FILE} and "
            f"{DCP_METADATA_FILE}); it may be from an interrupted save."
            + _earlier_checkpoint_hint(path, field, legacy_field, prefix=" ")
        )
    extra = read_extra_state(path, field, legacy_field)  # and the DCP files' sizes
    rank, world = _rank(), _world_size()
    saved_world = extra.get("world_size")
    same_world = saved_world == world
    loader_rank = rank
    if not same_world and dataloader is not None:
        loader_rank = _rank_with_same_data(extra, data_rank)
        if loader_rank is None:
            raise CheckpointError(
                f"{path} was saved with world_size={saved_world}, this run has world_size={world}"
                " and another data-parallel size: the per-rank data-loader positions (and RNG "
                "states) cannot be mapped, so an exact resume is impossible. Resume with the "
                "saved data-parallel size (the pipeline and tensor degrees may change), or load "
                "weights/optimizer only (dataloader=None) and restart the data."
            )
    # The shared files were checked above (every rank sees the same ones, so every rank raises
    # together); this rank's own small files are agreed on across ranks before the DCP load.
    local_error: CheckpointError | None = None
    sched_state = dl_state = rng_state = None
    try:
        if lr_scheduler is not None:
            sched_state = _load_small_file(
                path, SCHEDULER_FILE, "the LR scheduler state", field, legacy_field
            )
        if dataloader is not None:
            dl_state = _load_small_file(
                path, dataloader_file(loader_rank),
                f"the data loader state of rank {loader_rank}", field, legacy_field,
            )
        if same_world:
            rng_state = _load_small_file(
                path, rng_file(rank), f"the RNG state of rank {rank}", field, legacy_field
            )
    except CheckpointError as e:
        local_error = e
    _agree_on_error(local_error)

    state = _dcp_state(model, optimizer)
    # DCP's CheckpointException (every rank's failures) is a BaseException.
    try:
        _dcp_load(state, path)
    except (Exception, _dcp_checkpoint_exception()) as e:  # noqa: BLE001
        shards = _shard_errors(e)
        if shards:
            files = sorted({s.file for s in shards})
            raise _damaged(
                path, ", ".join(files), f"cannot be read ({shards[0].reason})", field, legacy_field
            ) from None
        raise CheckpointError(
            f"loading model/optimizer state from {path} failed: {_reason(_first_failure(e))}"
        ) from None
    _restore_dcp_state(model, optimizer, state)

    if lr_scheduler is not None:
        lr_scheduler.load_state_dict(sched_state)
    if dataloader is not None:
        dataloader.load_state_dict(dl_state)
    # RNG last: nothing above may consume random numbers after the restore.
    if same_world:
        set_rng_state(rng_state)
    elif rank == 0:
        logger.warning(
            "%s: saved with world_size=%s, loaded with %d: RNG states not restored.",
            path,
            saved_world,
            world,
        )
    logger.info("Loaded checkpoint %s (global_step=%s)", path, extra.get("global_step"))
    return extra
