"""Background saves: at most one in flight, on its own process group.

For ``save_checkpoint(..., async_save=True)`` the DCP state dict is snapshotted into fresh CPU
tensors *before* the call returns (so training can keep updating the live parameters without
tearing the checkpoint, cf. legacy bug E.12); the small per-rank files are written
synchronously; a background thread then runs ``dcp.save`` over a dedicated gloo process group (so
its collectives never interleave with the training collectives on the default group) and
performs the barrier + atomic rename. Only one save is ever in flight: every save/load first
waits for the previous one (:func:`wait_async_save`), and the trainer must call
:func:`wait_async_save` at train end. An error in the background thread is re-raised by the next
wait.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from hyper_parallel.runtime.fault_injection import maybe_kill_during_save

from .atomic import _finalize
from .dcp_io import _dcp_save
from .errors import CheckpointError
from .ranks import _distributed

logger = logging.getLogger(__name__)


@dataclass
class _PendingSave:
    step: int
    final_dir: str
    thread: threading.Thread
    error: Exception | None = None


_PENDING: _PendingSave | None = None
_ASYNC_GROUP = None
_ASYNC_GROUP_WORLD = None


def _async_group():
    """A gloo group reserved for background saves (created collectively on first use, again
    for each new default process group: a trainer closed and another built in the same process
    must not save through the destroyed one)."""
    global _ASYNC_GROUP, _ASYNC_GROUP_WORLD
    if not _distributed():
        return None
    if _ASYNC_GROUP is None or _ASYNC_GROUP_WORLD is not dist.group.WORLD:
        _ASYNC_GROUP = dist.new_group(backend="gloo")
        _ASYNC_GROUP_WORLD = dist.group.WORLD
    return _ASYNC_GROUP


def async_save_in_flight() -> bool:
    """True while a background save has not been waited for."""
    return _PENDING is not None


def wait_async_save() -> str | None:
    """Block until the in-flight async save (if any) finished; re-raise its error.

    Returns the directory of the checkpoint it completed, or None when nothing was in flight.
    """
    global _PENDING
    pending, _PENDING = _PENDING, None
    if pending is None:
        return None
    pending.thread.join()
    if pending.error is not None:
        raise CheckpointError(
            f"the asynchronous save of step {pending.step} into {pending.final_dir} failed: {pending.error!r}"
        ) from pending.error
    return pending.final_dir


def _async_worker(pending: _PendingSave, state: dict, tmp: str, group) -> None:
    try:
        _dcp_save(state, tmp, process_group=group)
        maybe_kill_during_save(pending.step)
        _finalize(tmp, pending.final_dir, group)
        logger.info("Saved checkpoint %s (async)", pending.final_dir)
    except Exception as e:  # noqa: BLE001 - surfaced by wait_async_save on the training thread
        pending.error = e


def _start_async_save(step: int, final: str, snapshot: dict[str, Any], tmp: str) -> None:
    """Write ``snapshot`` (already detached from the live tensors) into ``tmp`` in the
    background and publish it as ``final``; the caller waited for the previous save."""
    global _PENDING
    group = _async_group()
    pending = _PendingSave(step=step, final_dir=final, thread=None)  # type: ignore[arg-type]
    pending.thread = threading.Thread(
        target=_async_worker, args=(pending, snapshot, tmp, group), name=f"ckpt-save-{step}"
    )
    _PENDING = pending
    pending.thread.start()
