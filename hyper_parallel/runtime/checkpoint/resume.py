"""Which checkpoint a run resumes from: the ``load_path`` setting resolved to a directory, and
the newest complete checkpoint of the run's own folder (``resume_latest``), agreed by every rank.
"""

from __future__ import annotations

import logging
import os

import torch
import torch.distributed as dist

from hyper_parallel.platform.collectives import all_reduce, comm_tensor

from .errors import LEGACY_LOAD_PATH_FIELD, LOAD_PATH_FIELD, CheckpointError, _field_ref
from .integrity import _earlier_checkpoint_hint
from .layout import (
    DCP_METADATA_FILE,
    EXTRA_STATE_FILE,
    _step_of,
    is_complete_checkpoint,
    latest_checkpoint,
    step_dir,
)
from .ranks import _distributed

#: Which checkpoint a run resumes from, in one line (the docs and the log both say it).
RESUME_RULE = (
    "with checkpoint.resume_latest on, the newest complete checkpoint under checkpoint.folder "
    "wins; checkpoint.load_path applies only when the folder holds none; with neither the run "
    "starts fresh"
)

logger = logging.getLogger(__name__)


def resolve_resume_path(
    load_path: str | None,
    output_dir: str,
    *,
    field: str = LOAD_PATH_FIELD,
    legacy_field: str | None = LEGACY_LOAD_PATH_FIELD,
) -> str | None:
    """Turn the ``load_path`` setting into the checkpoint directory to load (None: fresh start).

    * None / "" -> None (no resume requested).
    * "latest"  -> newest complete checkpoint under ``output_dir``; None when there is none yet
      (the auto-resume idiom for restartable jobs: the first launch starts fresh, and says so).
    * a complete ``step_<N>`` directory -> that directory.
    * a directory holding ``step_<N>`` directories -> the newest complete one (error if none).
    Anything else (missing path, interrupted ``.step_<N>.tmp``, incomplete dir) is a CheckpointError.
    ``field`` / ``legacy_field`` name the setting in the messages (default: the engine's
    ``checkpoint.load_path``, legacy ``train.checkpoint.load_path``).
    """
    if load_path is None or load_path == "":
        return None
    if load_path == "latest":
        found = latest_checkpoint(output_dir)
        if found is None:
            logger.warning(
                "%s but %s holds no complete checkpoint: starting from step 0.",
                _field_ref(field, legacy_field, "latest"),
                output_dir,
            )
        return found
    if not os.path.isdir(load_path):
        raise CheckpointError(
            f"{_field_ref(field, legacy_field, load_path)} does not exist or is not a directory; "
            "give a step_<N> checkpoint directory, a directory holding them, or 'latest'."
        )
    if is_complete_checkpoint(load_path):
        return load_path
    if _step_of(load_path) is None:
        found = latest_checkpoint(load_path)
        if found is not None:
            return found
    raise CheckpointError(
        f"{_field_ref(field, legacy_field, load_path)} is not a complete checkpoint (expected "
        f"{EXTRA_STATE_FILE} and {DCP_METADATA_FILE}, or step_<N> subdirectories); it may be from "
        "an interrupted save."
        + _earlier_checkpoint_hint(load_path, field, legacy_field, prefix=" ")
    )


def newest_agreed(folder: str) -> str | None:
    """The newest complete ``step_<N>`` under ``folder`` that every rank sees (collective in a
    multi-rank job); None when the folder holds none.

    Each rank lists the shared folder itself; a file system that shows a just-written step to
    some ranks only (an NFS attribute cache) must not make the ranks load different steps, so
    the ranks take the smallest of their newest steps, and say so when they differed.
    """
    found = latest_checkpoint(folder)
    step = -1 if found is None else _step_of(found)
    if not _distributed():
        return found
    group = dist.group.WORLD
    # One all-reduce for both ends: MIN over (step, -step) gives (oldest newest, -newest newest).
    seen = all_reduce(comm_tensor([step, -step], dtype=torch.int64, group=group), group,
                      dist.ReduceOp.MIN).tolist()
    low, high = seen[0], -seen[1]
    if low != high:
        chosen = (f"step {low}, the newest that every rank sees" if low >= 0 else
                  "none: a rank sees no complete checkpoint there")
        logger.warning("The ranks see different newest checkpoints under %s (up to step %d): "
                       "taking %s.", folder, high, chosen)
    return None if low < 0 else step_dir(folder, low)
