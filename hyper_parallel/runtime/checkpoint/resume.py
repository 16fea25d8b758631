"""Which checkpoint a run resumes from: the ``load_path`` setting resolved to a directory, and
the newest complete checkpoint of the run's own folder (``resume_latest``), agreed by every rank.

**A flaky shared file system.** Every rank lists the folder itself, and a cluster's file system
does not always show every node the same thing at once: NFS caches a directory's listing for up
to ``acdirmax`` (60 s by default), so a node can miss a step another node just published, or
see its directory before its files; a mount can fail a listing (``ESTALE``, ``EIO``). A rank
that resumed from another step than its peers, or started fresh while they resumed, would
split the job; a whole job that starts fresh (or from ``load_path``) over a folder holding
checkpoints later overwrites them. So the ranks gather what each one sees
(:func:`newest_agreed`) and list again, with a growing pause (:data:`LISTING_RETRY_DELAYS`),
while their views differ or a ``step_<N>`` directory looks incomplete; if that does not settle
it, every rank refuses with the same :class:`CheckpointError` (what each rank saw, and the fix)
-- except where every rank sees the same newest complete checkpoint, which is then taken over
the incomplete newer directories, with a warning (a save publishes ``step_<N>`` only once it is
complete, so an incomplete one was not written by a save, or lost files).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

import torch.distributed as dist

from hyper_parallel.platform.collectives import ALONE, gather_ints

from .errors import LEGACY_LOAD_PATH_FIELD, LOAD_PATH_FIELD, CheckpointError, _field_ref
from .integrity import _earlier_checkpoint_hint
from .layout import (
    DCP_METADATA_FILE,
    EXTRA_STATE_FILE,
    _step_of,
    is_complete_checkpoint,
    step_dir,
)
from .ranks import _distributed, _rank

#: Which checkpoint a run resumes from, in one line (the docs and the log both say it).
RESUME_RULE = (
    "with checkpoint.resume_latest on, the newest complete checkpoint under checkpoint.folder "
    "wins; checkpoint.load_path applies only when the folder holds none; with neither the run "
    "starts fresh"
)

logger = logging.getLogger(__name__)

#: Pauses (seconds) between the listings of the checkpoint folder while the ranks' views differ
#: or its newest ``step_<N>`` directory looks incomplete: together longer than NFS's default
#: directory attribute cache (``acdirmax``, 60 s), the longest a node shows a stale listing.
#: Paid only when the listings disagree; a refusal after them costs a restart.
LISTING_RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)

#: A rank's view of the folder (:func:`folder_view`): the newest complete checkpoint's step and
#: the newest ``step_<N>`` directory's, complete or not; :data:`NONE` when there is none, and
#: ``(UNREADABLE, NONE)`` when the folder could not be listed.
NONE = -1
UNREADABLE = -2


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
    ``checkpoint.load_path``, legacy ``train.checkpoint.load_path``). The two listings
    ("latest", a directory of checkpoints) are :func:`newest_agreed`'s: collective in a
    multi-rank job, and refused when the ranks' listings do not settle.
    """
    if load_path is None or load_path == "":
        return None
    if load_path == "latest":
        found = newest_agreed(output_dir)
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
        found = newest_agreed(load_path)
        if found is not None:
            return found
    raise CheckpointError(
        f"{_field_ref(field, legacy_field, load_path)} is not a complete checkpoint (expected "
        f"{EXTRA_STATE_FILE} and {DCP_METADATA_FILE}, or step_<N> subdirectories); it may be from "
        "an interrupted save."
        + _earlier_checkpoint_hint(load_path, field, legacy_field, prefix=" ")
    )


def folder_view(folder: str) -> tuple[int, int]:
    """This rank's view of ``folder``: ``(newest complete step, newest step_<N> directory)``,
    :data:`NONE` for none; ``(UNREADABLE, NONE)`` when listing it fails (the error is logged
    here, on the rank that met it)."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return NONE, NONE
    except OSError as exc:
        logger.warning("Cannot list the checkpoint folder %s: %s", folder, exc)
        return UNREADABLE, NONE
    complete = newest = NONE
    for name in names:
        step = _step_of(name)
        path = os.path.join(folder, name)
        if step is None or not os.path.isdir(path):
            continue
        newest = max(newest, step)
        if step > complete and is_complete_checkpoint(path):
            complete = step
    return complete, newest


def agreed_step(views: Sequence[Sequence[int]], *, final: bool) -> int | None:
    """The step every rank resumes from, given each rank's :func:`folder_view` (:data:`NONE`:
    nothing to resume); None while the views do not settle it (list again), and a
    ``ValueError`` saying why, and the fix, when they still do not and ``final`` is set.

    Settled: every rank sees the same newest complete step and no newer ``step_<N>``
    directory. Finally, every rank seeing the same newest complete step is enough (the newer
    directories are incomplete everywhere); anything else -- a rank that sees none, or another
    step, or cannot list the folder, or a folder of incomplete directories only -- never
    resumes from :data:`NONE`, since that starts fresh (or from ``load_path``) over checkpoints.
    """
    completes = {int(view[0]) for view in views}
    newest = max(int(view[1]) for view in views)
    if len(completes) == 1:
        (step,) = completes
        if step != UNREADABLE and newest <= step:
            return step
        if final and step >= 0:
            return step
    if not final:
        return None
    if completes == {NONE} and newest >= 0:
        raise ValueError(
            f"it holds step_<N> directories but no complete checkpoint (the newest, "
            f"step_{newest}, lacks {EXTRA_STATE_FILE} or {DCP_METADATA_FILE}); a save publishes "
            "step_<N> only once it is complete, so these lost files, were not written by a "
            "save, or the file system does not show their files yet. Refusing to start fresh "
            "(or from checkpoint.load_path) over them: restore their files, or move them out of "
            "the folder (or point checkpoint.folder elsewhere) to start fresh"
        )
    if completes == {UNREADABLE}:
        raise ValueError("no rank can list it (each logged its error): check the mount and its "
                         "permissions, then restart")
    raise ValueError(
        f"the ranks see it differently: {describe_views(views)}. Refusing to start: resuming "
        "from different steps would split the ranks, and starting fresh (or from "
        "checkpoint.load_path) would train over these checkpoints and overwrite them. Check "
        "that every node mounts the folder from the same file system, then restart (NFS shows "
        "a node a stale listing for up to acdirmax, 60 s by default); to resume from an older "
        "step that every rank sees, move the newer step_<N> directories out of the folder"
    )


def _ranks_text(ranks: list[int]) -> str:
    """``rank 3`` / ``ranks 0-2, 5``: rank numbers in runs (512 ranks stay one line)."""
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return ("rank " if len(ranks) == 1 else "ranks ") + text


def _view_text(complete: int, newest: int) -> str:
    if complete == UNREADABLE:
        return "cannot list it"
    seen = "no complete checkpoint" if complete == NONE else f"step {complete}"
    if newest > complete:
        seen += f" (step_{newest} incomplete)"
    return seen


def describe_views(views: Sequence[Sequence[int]]) -> str:
    """What each rank saw, grouped: ``ranks 0, 2-7 see step 8; rank 1 sees no complete
    checkpoint``."""
    by_view: dict[tuple[int, int], list[int]] = {}
    for rank, view in enumerate(views):
        by_view.setdefault((int(view[0]), int(view[1])), []).append(rank)
    parts = []
    for (complete, newest), ranks in sorted(by_view.items(), key=lambda item: item[1][0]):
        verb = "" if complete == UNREADABLE else ("sees " if len(ranks) == 1 else "see ")
        parts.append(f"{_ranks_text(ranks)} {verb}{_view_text(complete, newest)}")
    return "; ".join(parts)


def newest_agreed(folder: str) -> str | None:
    """The newest complete ``step_<N>`` under ``folder`` that every rank sees (collective in a
    multi-rank job); None when the folder holds no ``step_<N>`` directory on any rank.

    The ranks gather their :func:`folder_view` and list again after each pause of
    :data:`LISTING_RETRY_DELAYS` until :func:`agreed_step` settles; when it never does, every
    rank raises the same :class:`CheckpointError` naming the folder, what each rank saw and
    the fix -- rather than resume from different steps, or start fresh over checkpoints.
    """
    group = dist.group.WORLD if _distributed() else ALONE
    delays = LISTING_RETRY_DELAYS
    waited = 0.0
    for listing in range(len(delays) + 1):
        views = gather_ints(folder_view(folder), group)
        final = listing == len(delays)
        try:
            step = agreed_step(views, final=final)
        except ValueError as why:
            raise CheckpointError(
                f"Cannot choose the checkpoint to resume from in {folder} after {listing + 1} "
                f"listings over {waited:.0f} s: {why}."
            ) from None
        if step is not None:
            break
        if listing == 0 and _rank() == 0:
            logger.warning("The ranks' listings of %s do not settle the checkpoint to resume "
                           "from (%s): listing again for up to %.0f s.", folder,
                           describe_views(views), sum(delays))
        time.sleep(delays[listing])
        waited += delays[listing]
    if _rank() == 0:
        newest = max(view[1] for view in views)
        if newest > step:
            logger.warning("%s: step_%d is incomplete on every rank after %d listings over "
                           "%.0f s (it lacks %s or %s); resuming from step %d, the newest "
                           "complete checkpoint (this run's save of step %d replaces it).",
                           folder, newest, listing + 1, waited, EXTRA_STATE_FILE,
                           DCP_METADATA_FILE, step, newest)
        elif listing:
            logger.warning("The ranks agree on %s after %d listings over %.0f s.",
                           "no checkpoint" if step < 0 else f"step {step}", listing + 1, waited)
    return None if step < 0 else step_dir(folder, step)
