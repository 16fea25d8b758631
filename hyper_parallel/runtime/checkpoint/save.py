"""Writing one checkpoint: :func:`save_checkpoint`.

**Fault injection (test hook).** With ``HYPER_PARALLEL_FAULT_INJECT=kill_during_save:<step>`` the
process calls ``os._exit(17)`` while saving step ``<step>``: after every file of that step was
written into the temporary directory, before the barrier/rename. Tests use it to prove that a
killed save leaves no ``step_<N>`` directory. The training loop's ``<kind>_at_step:...`` values of
the same variable are left alone; any other value is an error (one parser for both:
:mod:`hyper_parallel.runtime.fault_injection`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import Any

import torch

from hyper_parallel.runtime.fault_injection import maybe_kill_during_save, save_kill_step

from .async_writer import _start_async_save, wait_async_save
from .atomic import _finalize, _torch_save, _write_json
from .dcp_io import _dcp_save, _dcp_state, _snapshot_to_cpu
from .errors import CheckpointError
from .extra_state import _dataloader_state, get_rng_state
from .layout import (
    EXTRA_STATE_FILE,
    FORMAT_VERSION,
    SCHEDULER_FILE,
    _tmp_dir,
    dataloader_file,
    rng_file,
    step_dir,
)
from .ranks import _barrier, _rank, _world_size

logger = logging.getLogger(__name__)


def save_checkpoint(
    output_dir: str,
    step: int,
    *,
    model: torch.nn.Module | list[torch.nn.Module],
    optimizer: Any | None,
    lr_scheduler,
    dataloader,
    extra: dict[str, Any] | None = None,
    async_save: bool = False,
) -> str:
    """Write the checkpoint of ``step`` to ``<output_dir>/step_<step>/`` atomically; return that path.

    Collective: every rank must call it. ``extra`` (JSON-serialisable) is stored in
    ``extra_state.json`` next to ``global_step``/``world_size`` and returned by
    ``load_checkpoint``. ``optimizer``, ``lr_scheduler`` and ``dataloader`` may be None (then
    they are not saved, and loading must pass None too). ``model`` may be a list of model parts and
    ``optimizer`` an optimizer container (see :mod:`.dcp_io`). With ``async_save`` the
    directory appears when the background write finishes (see :mod:`.async_writer`).
    """
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"save_checkpoint: step must be a non-negative int, got {step!r}")
    extra = dict(extra or {})
    reserved = {"format_version", "global_step", "world_size"} & set(extra)
    if reserved:
        raise ValueError(
            f"save_checkpoint: extra must not set the reserved keys {sorted(reserved)}"
        )
    if optimizer is not None and not optimizer.state:
        # torch's get_state_dict would initialise the state with a fake zero-lr step, which bumps
        # Adam's step counter and silently changes every later update of the live run.
        raise CheckpointError(
            f"save_checkpoint(step={step}): the optimizer has no state yet (no optimizer step was taken); "
            "save after the first step, or pass optimizer=None for a weights-only checkpoint."
        )
    fault_step = save_kill_step()  # validate the hook's syntax before writing anything

    wait_async_save()  # at most one save in flight; also surfaces a failed previous async save
    rank, world = _rank(), _world_size()
    final, tmp = step_dir(output_dir, step), _tmp_dir(output_dir, step)

    if rank == 0:
        os.makedirs(output_dir, exist_ok=True)
        if os.path.exists(tmp):
            logger.warning("Removing %s left over by an interrupted save.", tmp)
            shutil.rmtree(tmp)
        os.makedirs(tmp)
    _barrier()

    # Small per-rank/rank-0 files first (cheap, always synchronous).
    _torch_save(get_rng_state(), os.path.join(tmp, rng_file(rank)))
    if dataloader is not None:
        _torch_save(_dataloader_state(dataloader), os.path.join(tmp, dataloader_file(rank)))
    if rank == 0:
        if lr_scheduler is not None:
            _torch_save(lr_scheduler.state_dict(), os.path.join(tmp, SCHEDULER_FILE))
        record = {
            "format_version": FORMAT_VERSION,
            "global_step": step,
            "world_size": world,
            **extra,
        }
        try:
            json.dumps(record)
        except TypeError as e:
            raise ValueError(f"save_checkpoint: extra must be JSON-serialisable: {e}") from e
        _write_json(record, os.path.join(tmp, EXTRA_STATE_FILE))

    state = _dcp_state(model, optimizer)
    if async_save:
        snapshot = _snapshot_to_cpu(state)  # taken now: later in-place updates cannot tear it
        _start_async_save(step, final, snapshot, tmp)
        return final

    _dcp_save(state, tmp)
    if fault_step == step:
        maybe_kill_during_save(step)
    _finalize(tmp, final)
    logger.info("Saved checkpoint %s", final)
    return final
