"""Where a checkpoint lives and what it is made of: the ``step_<N>`` folders and their files.

One checkpoint is the directory ``<output_dir>/step_<N>/``::

    .metadata, __<r>_<k>.distcp   model + optimizer, torch.distributed.checkpoint (DCP)
    scheduler.pt                  rank 0: ``lr_scheduler.state_dict()``
    extra_state.json              rank 0: format_version, global_step, world_size + caller's extra
    rng_rank{r}.pt                every rank: the RNG states
    dataloader_rank{r}.pt         every rank: ``StatefulDataLoader.state_dict()``
    hf_ckpt/                      optional, the Hugging Face export

A save writes into the hidden sibling ``.step_<N>.tmp/`` and renames it when complete, so a
``step_<N>`` directory is complete by construction; the finders below also require its two
metadata files, so a directory someone else created is never taken for a checkpoint.
"""

from __future__ import annotations

import logging
import os
import re

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
STEP_PREFIX = "step_"
EXTRA_STATE_FILE = "extra_state.json"
SCHEDULER_FILE = "scheduler.pt"
DCP_METADATA_FILE = ".metadata"
HF_SUBDIR = "hf_ckpt"

_STEP_DIR_RE = re.compile(rf"^{STEP_PREFIX}(\d+)$")


def step_dir(output_dir: str, step: int) -> str:
    """Final directory of the checkpoint of ``step``."""
    return os.path.join(output_dir, f"{STEP_PREFIX}{step}")


def _tmp_dir(output_dir: str, step: int) -> str:
    return os.path.join(output_dir, f".{STEP_PREFIX}{step}.tmp")


def rng_file(rank: int) -> str:
    return f"rng_rank{rank}.pt"


def dataloader_file(rank: int) -> str:
    return f"dataloader_rank{rank}.pt"


def _step_of(path: str) -> int | None:
    """N of a ``step_<N>`` directory name (None for any other name)."""
    m = _STEP_DIR_RE.match(os.path.basename(os.path.normpath(path)))
    return None if m is None else int(m.group(1))


def is_complete_checkpoint(path: str) -> bool:
    """True when ``path`` is a finished checkpoint directory (renamed, with metadata files)."""
    return (
        os.path.isdir(path)
        and _step_of(path) is not None
        and os.path.isfile(os.path.join(path, EXTRA_STATE_FILE))
        and os.path.isfile(os.path.join(path, DCP_METADATA_FILE))
    )


def latest_checkpoint(output_dir: str) -> str | None:
    """The complete ``step_<N>`` directory with the highest N under ``output_dir`` (None if none).

    Temporary ``.step_<N>.tmp`` directories of interrupted saves never match; a ``step_<N>``
    directory without its metadata files (not written by ``save_checkpoint``) is skipped with a
    warning.
    """
    if not os.path.isdir(output_dir):
        return None
    best: tuple[int, str] | None = None
    for name in os.listdir(output_dir):
        m = _STEP_DIR_RE.match(name)
        if m is None:
            continue
        path = os.path.join(output_dir, name)
        if not os.path.isdir(path):
            continue
        if not is_complete_checkpoint(path):
            logger.warning("Ignoring incomplete checkpoint directory %s", path)
            continue
        if best is None or int(m.group(1)) > best[0]:
            best = (int(m.group(1)), path)
    return None if best is None else best[1]


def complete_checkpoints(output_dir: str) -> list[tuple[int, str]]:
    """``(step, path)`` of every complete ``step_<N>`` directory under ``output_dir``, by step.

    Unlike :func:`latest_checkpoint` it does not warn about incomplete directories (it is used
    by ``purge_old_checkpoints``, which simply leaves them alone).
    """
    if not os.path.isdir(output_dir):
        return []
    found = []
    for name in os.listdir(output_dir):
        m = _STEP_DIR_RE.match(name)
        path = os.path.join(output_dir, name)
        if m is not None and is_complete_checkpoint(path):
            found.append((int(m.group(1)), path))
    return sorted(found)
