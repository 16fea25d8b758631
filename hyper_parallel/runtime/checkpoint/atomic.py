"""Atomic publication: files are flushed to disk, and a directory appears only when complete.

Every rank writes into the hidden sibling ``<output_dir>/.step_<N>.tmp/``; after a barrier (all
ranks finished writing) rank 0 renames it to ``step_<N>``. A run killed mid-save therefore
leaves only a ``.step_<N>.tmp`` directory, which ``latest_checkpoint`` ignores and the next save
of that step removes. ``output_dir`` must be one shared file system for all ranks (DCP needs that
anyway for multi-node loads), because only rank 0 renames.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import Any

import torch

from .ranks import _barrier, _rank

logger = logging.getLogger(__name__)


def _fsync_dir(path: str) -> None:
    """Persist a rename/creation in ``path`` (best effort: not every platform can open dirs)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _torch_save(obj: Any, path: str) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def _write_json(obj: Any, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _replace_dir(src: str, dst: str) -> None:
    """Rename ``src`` to ``dst``; an existing ``dst`` (a re-save of the same step) is replaced.

    The old directory is first moved aside, so at every instant at least one complete copy exists.
    """
    if os.path.exists(dst):
        logger.warning(
            "Checkpoint directory %s already exists; replacing it with the new save.", dst
        )
        parent, name = os.path.split(dst)
        old = os.path.join(parent, f".{name}.old")
        if os.path.exists(old):
            shutil.rmtree(old)
        os.rename(dst, old)
        os.rename(src, dst)
        shutil.rmtree(old)
    else:
        os.rename(src, dst)
    _fsync_dir(os.path.dirname(dst) or ".")


def _finalize(tmp: str, final: str, group=None) -> None:
    """All ranks: barrier (everyone finished writing), rank 0 renames, barrier (dir visible)."""
    _barrier(group)
    if _rank() == 0:
        _replace_dir(tmp, final)
    _barrier(group)
