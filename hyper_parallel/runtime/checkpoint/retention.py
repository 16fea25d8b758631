"""Which checkpoints stay: ``keep_latest_k`` without ever losing the last complete one."""

from __future__ import annotations

import logging
import os
import re
import shutil

from .atomic import _fsync_dir
from .layout import STEP_PREFIX, complete_checkpoints
from .ranks import _rank

logger = logging.getLogger(__name__)

_DELETING_RE = re.compile(rf"^\.{STEP_PREFIX}\d+\.deleting$")


def purge_old_checkpoints(output_dir: str, keep_latest_k: int) -> list[str]:
    """Delete all but the ``keep_latest_k`` newest *complete* checkpoints; return what was deleted.

    ``keep_latest_k <= 0`` keeps everything. Runs on rank 0 only (the checkpoint directory is one
    shared file system; other ranks return ``[]`` at once), and is not collective.

    Crash safety: only complete checkpoints are counted, so a save still in flight (its
    ``.step_<N>.tmp``) or an interrupted one never lets an older complete checkpoint be deleted
    early; and each victim is first renamed to the hidden ``.step_<N>.deleting`` (atomic), so a
    process killed mid-delete never leaves a half-deleted ``step_<N>`` that looks complete.
    Leftover ``.deleting`` directories are removed by the next purge.
    """
    if keep_latest_k <= 0 or _rank() != 0 or not os.path.isdir(output_dir):
        return []
    for name in os.listdir(output_dir):
        if _DELETING_RE.match(name):
            shutil.rmtree(os.path.join(output_dir, name), ignore_errors=True)
    deleted = []
    for step, path in complete_checkpoints(output_dir)[:-keep_latest_k]:
        trash = os.path.join(output_dir, f".{STEP_PREFIX}{step}.deleting")
        os.rename(path, trash)
        _fsync_dir(output_dir)
        shutil.rmtree(trash)
        deleted.append(path)
        logger.info("Deleted old checkpoint %s (keep_latest_k=%d)", path, keep_latest_k)
    return deleted
