"""Which checkpoint a run resumes from: the ``load_path`` setting resolved to a directory."""

from __future__ import annotations

import logging
import os

from .errors import LEGACY_LOAD_PATH_FIELD, LOAD_PATH_FIELD, CheckpointError, _field_ref
from .integrity import _earlier_checkpoint_hint
from .layout import (
    DCP_METADATA_FILE,
    EXTRA_STATE_FILE,
    _step_of,
    is_complete_checkpoint,
    latest_checkpoint,
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
