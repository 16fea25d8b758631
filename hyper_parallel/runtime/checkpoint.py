"""Atomic, resharding-friendly training checkpoints (shared by both trainers).

One checkpoint is the directory ``<output_dir>/step_<N>/``::

    .metadata, __<r>_<k>.distcp   model + optimizer, torch.distributed.checkpoint (DCP) of
                                  {"model": ..., "optimizer": ...} from ``get_state_dict`` (FQN keys,
                                  DTensor shards for FSDP2/TP, so a different mesh can load it)
    scheduler.pt                  rank 0: ``lr_scheduler.state_dict()``
    extra_state.json              rank 0: format_version, global_step, world_size + caller's ``extra``
                                  (the trainers put ``epoch`` there)
    rng_rank{r}.pt                every rank: python / numpy / torch CPU / CUDA (or NPU) RNG states
    dataloader_rank{r}.pt         every rank: ``StatefulDataLoader.state_dict()``
    hf_ckpt/                      optional, written by :func:`export_hf_weights` after the save

**Atomicity.** Every rank writes into the hidden sibling ``<output_dir>/.step_<N>.tmp/``; after a
barrier (all ranks finished writing) rank 0 renames it to ``step_<N>``. A run killed mid-save
therefore leaves only a ``.step_<N>.tmp`` directory, which :func:`latest_checkpoint` ignores and the
next save of that step removes. ``output_dir`` must be one shared file system for all ranks (DCP
needs that anyway for multi-node loads), because only rank 0 renames.

**Async saves** (``save_checkpoint(..., async_save=True)``): the DCP state dict is snapshotted into
fresh CPU tensors *before* the call returns (so training can keep updating the live parameters
without tearing the checkpoint, cf. legacy bug E.12); the small per-rank files are written
synchronously; a background thread then runs ``dcp.save`` over a dedicated gloo process group (so its
collectives never interleave with the training collectives on the default group) and performs the
barrier + atomic rename. Only one save is ever in flight: every save/load first waits for the
previous one (:func:`wait_async_save`), and the trainer must call :func:`wait_async_save` at train
end. An error in the background thread is re-raised by the next wait.

**Damaged checkpoints.** :func:`load_checkpoint` checks a step directory before it restores
anything from it: ``extra_state.json`` and ``.metadata`` must parse, every ``.distcp`` shard that
``.metadata`` names must exist and be at least as long as the items it places in it (a size
check, no hashing), and the per-rank ``.pt`` files must load (the ranks agree on the outcome, so
a file damaged on one rank fails every rank instead of leaving the others in a collective). A
shard that still fails inside ``dcp.load`` is named too (the reader reads one file at a time).
Each failure is a :class:`CheckpointError` naming the directory, the file and the newest earlier
complete checkpoint that passes the same checks, with the setting that loads it
(``checkpoint.load_path``; legacy ``train.checkpoint.load_path``; callers may pass their own
field names).

**Fault injection (test hook).** With ``HYPER_PARALLEL_FAULT_INJECT=kill_during_save:<step>`` the
process calls ``os._exit(17)`` while saving step ``<step>``: after every file of that step was
written into the temporary directory, before the barrier/rename. Tests use it to prove that a killed
save leaves no ``step_<N>`` directory. The trainer's own ``exit_at_step:...`` value of the same
variable is left alone; any other value is an error.

**Model parts and optimizer containers.** ``model`` may be one module or a list of model parts
(their state dicts are merged by FQN). ``optimizer`` may be a ``torch.optim.Optimizer`` (saved with
``get_state_dict(model, optimizer)``, the legacy layout) or a container such as
:class:`hyper_parallel.components.optimizer.OptimizersContainer`: any object that is not a torch
optimizer and provides ``state`` (empty before the first step), ``state_dict()`` (its DCP state) and
``load_state_dict(state)``. ``lr_scheduler`` and ``dataloader`` only need
``state_dict()`` / ``load_state_dict()``.

Everything works in a single process without an initialized process group as well.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import random
import re
import shutil
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
STEP_PREFIX = "step_"
EXTRA_STATE_FILE = "extra_state.json"
SCHEDULER_FILE = "scheduler.pt"
DCP_METADATA_FILE = ".metadata"
HF_SUBDIR = "hf_ckpt"
FAULT_INJECT_ENV = "HYPER_PARALLEL_FAULT_INJECT"
FAULT_EXIT_CODE = 17
# Other values of the same variable that belong to the trainer (base.py FAULT_KINDS:
# <kind>_at_step:<step>[:rank]).
_OTHER_FAULT_KINDS = ("exit_at_step", "raise_at_step", "sigkill_at_step", "sigterm_at_step")
# Key infixes added by activation-checkpoint wrappers / torch.compile; HF names never contain them.
_WRAPPER_INFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.")

_STEP_DIR_RE = re.compile(rf"^{STEP_PREFIX}(\d+)$")
# The setting that picks the checkpoint to load, as errors name it (``resolve_resume_path`` /
# ``load_checkpoint`` take others from their callers).
LOAD_PATH_FIELD = "checkpoint.load_path"
LEGACY_LOAD_PATH_FIELD = "train.checkpoint.load_path"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, inconsistent or could not be written."""


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------


def step_dir(output_dir: str, step: int) -> str:
    """Final directory of the checkpoint of ``step``."""
    return os.path.join(output_dir, f"{STEP_PREFIX}{step}")


def _tmp_dir(output_dir: str, step: int) -> str:
    return os.path.join(output_dir, f".{STEP_PREFIX}{step}.tmp")


def rng_file(rank: int) -> str:
    return f"rng_rank{rank}.pt"


def dataloader_file(rank: int) -> str:
    return f"dataloader_rank{rank}.pt"


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _rank() -> int:
    return dist.get_rank() if _distributed() else 0


def _world_size() -> int:
    return dist.get_world_size() if _distributed() else 1


def _barrier(group=None) -> None:
    if _distributed():
        dist.barrier(group=group)


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


# ---------------------------------------------------------------------------------------------
# fault injection (test hook)
# ---------------------------------------------------------------------------------------------


def _fault_kill_step() -> int | None:
    spec = os.environ.get(FAULT_INJECT_ENV, "").strip()
    if not spec:
        return None
    kind, _, arg = spec.partition(":")
    if kind in _OTHER_FAULT_KINDS:  # the trainer's own hook, not ours
        return None
    if kind != "kill_during_save" or not arg.strip().isdigit():
        raise ValueError(
            f"{FAULT_INJECT_ENV}={spec!r} is not understood; checkpointing supports "
            f"'kill_during_save:<step>', the trainer {', '.join(_OTHER_FAULT_KINDS)} "
            "(or unset the variable)."
        )
    return int(arg)


def _maybe_inject_fault(step: int) -> None:
    if _fault_kill_step() == step:
        logger.error(
            "%s: killing the process in the middle of saving step %d", FAULT_INJECT_ENV, step
        )
        logging.shutdown()
        os._exit(FAULT_EXIT_CODE)


# ---------------------------------------------------------------------------------------------
# RNG and per-rank state
# ---------------------------------------------------------------------------------------------


def _accelerator_module():
    """``torch.cuda`` or ``torch.npu`` when that device is usable, else None."""
    if torch.cuda.is_available():
        return torch.cuda
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        return npu
    return None


def get_rng_state() -> dict[str, Any]:
    """All RNG states of this process, in a form ``torch.load(weights_only=True)`` accepts."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np
    except ImportError:  # numpy is optional
        np = None
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = (
            kind,
            torch.from_numpy(keys.astype("int64")),
            int(pos),
            int(has_gauss),
            float(cached),
        )
    acc = _accelerator_module()
    if acc is not None:
        state["accelerator"] = acc.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`get_rng_state`."""
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype("uint32"), pos, has_gauss, cached))
    acc = _accelerator_module()
    if "accelerator" in state:
        if acc is None:
            raise CheckpointError(
                "the checkpoint holds accelerator (CUDA/NPU) RNG states but no accelerator is available "
                "in this process; resume on the same kind of device."
            )
        acc.set_rng_state_all(state["accelerator"])


def _dataloader_state(dataloader) -> Any:
    if not callable(getattr(dataloader, "state_dict", None)):
        raise TypeError(
            f"cannot checkpoint the data loader position: {type(dataloader).__name__} has no state_dict(); "
            "use torchdata.stateful_dataloader.StatefulDataLoader (or pass dataloader=None)."
        )
    return dataloader.state_dict()


# ---------------------------------------------------------------------------------------------
# DCP state
# ---------------------------------------------------------------------------------------------


def _model_parts(model) -> list[torch.nn.Module]:
    """``model`` as a list of model parts (a single module is one part)."""
    if isinstance(model, torch.nn.Module):
        return [model]
    parts = list(model)
    if not parts or not all(isinstance(p, torch.nn.Module) for p in parts):
        raise TypeError(
            f"model must be an nn.Module or a non-empty list of nn.Module model parts, got {model!r}"
        )
    return parts


def _is_torch_optimizer(optimizer) -> bool:
    """A plain torch optimizer (legacy layout) rather than a container owning its DCP state."""
    return isinstance(optimizer, torch.optim.Optimizer)


def _dcp_state(model, optimizer) -> dict[str, Any]:
    """{"model": ..., "optimizer": ...} in DCP form (FQN keys; DTensors stay sharded)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    parts = _model_parts(model)
    if optimizer is not None and _is_torch_optimizer(optimizer):
        if len(parts) != 1:
            raise TypeError(
                "a single torch optimizer cannot be checkpointed with several model parts; use "
                "an optimizer container (one optimizer per part) such as OptimizersContainer"
            )
        model_sd, optim_sd = get_state_dict(parts[0], optimizer)
        return {"model": model_sd, "optimizer": optim_sd}
    model_sd: dict[str, Any] = {}
    for part in parts:
        part_sd = get_model_state_dict(part)
        clash = next((k for k in part_sd if k in model_sd), None)
        if clash is not None:
            raise ValueError(
                f"two model parts both hold {clash!r}; model parts must keep distinct parameter "
                "names (FQNs of the whole model)"
            )
        model_sd.update(part_sd)
    if optimizer is None:
        return {"model": model_sd}
    return {"model": model_sd, "optimizer": optimizer.state_dict()}


def _restore_dcp_state(model, optimizer, state: dict[str, Any]) -> None:
    """Push a loaded :func:`_dcp_state` back into ``model`` and ``optimizer``."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_state_dict,
    )

    parts = _model_parts(model)
    if optimizer is not None and _is_torch_optimizer(optimizer):
        set_state_dict(
            parts[0],
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
        )
        return
    if len(parts) == 1:
        set_model_state_dict(parts[0], state["model"])
    else:
        # Each part takes its own FQNs from the merged dict; dcp.load already failed on any key
        # missing from the checkpoint, so non-strict loading cannot drop a weight silently.
        for part in parts:
            set_model_state_dict(part, state["model"], options=StateDictOptions(strict=False))
    if optimizer is not None:
        optimizer.load_state_dict(state["optimizer"])


def _snapshot_to_cpu(obj: Any) -> Any:
    """Deep copy of a (possibly DTensor) state dict into new CPU tensors.

    ``to("cpu", copy=True)`` always allocates (a plain ``.cpu()`` would alias CPU tensors, and a
    checkpoint taken from an alias tears when the optimizer updates it in place). DTensors keep their
    mesh/placements, so DCP still writes per-rank shards.
    """
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _snapshot_to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_snapshot_to_cpu(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_snapshot_to_cpu(v) for v in obj)
    return copy.deepcopy(obj)


@contextlib.contextmanager
def _quiet_single_process():
    """Silence DCP's "assuming the intent is to save/load in a single process" warning.

    Single-process use without a process group is a supported mode here, not an accident.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"torch\.distributed is disabled, unavailable or uninitialized"
        )
        yield


def _dcp_save(state: dict[str, Any], path: str, process_group=None) -> None:
    import torch.distributed.checkpoint as dcp

    with _quiet_single_process():
        dcp.save(state, checkpoint_id=path, process_group=process_group, no_dist=not _distributed())


def _dcp_load(state: dict[str, Any], path: str) -> None:
    import torch.distributed.checkpoint as dcp

    with _quiet_single_process():
        dcp.load(
            state,
            checkpoint_id=path,
            storage_reader=_attributing_reader(path),
            no_dist=not _distributed(),
        )


def _dcp_checkpoint_exception() -> type[BaseException]:
    from torch.distributed.checkpoint.api import CheckpointException

    return CheckpointException


def _attributing_reader(path: str):
    """A ``FileSystemReader`` that reads one shard file at a time and turns a failure into a
    :class:`_ShardReadError` naming the file (DCP's own error does not say which file)."""
    import dataclasses

    from torch.distributed.checkpoint import FileSystemReader
    from torch.futures import Future

    class AttributingReader(FileSystemReader):
        def read_data(self, plan, planner):
            per_file: dict[str, list] = {}
            for item in plan.items:
                rel = self.storage_data[item.storage_index].relative_path
                per_file.setdefault(rel, []).append(item)
            for rel, items in per_file.items():
                try:
                    super().read_data(dataclasses.replace(plan, items=items), planner).wait()
                except Exception as e:  # attributed and re-raised
                    raise _ShardReadError(rel, _reason(e)) from e
            done: Future = Future()
            done.set_result(None)
            return done

    return AttributingReader(path)


# ---------------------------------------------------------------------------------------------
# async machinery
# ---------------------------------------------------------------------------------------------


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


def _finalize(tmp: str, final: str, group=None) -> None:
    """All ranks: barrier (everyone finished writing), rank 0 renames, barrier (dir visible)."""
    _barrier(group)
    if _rank() == 0:
        _replace_dir(tmp, final)
    _barrier(group)


def _async_worker(pending: _PendingSave, state: dict, tmp: str, group) -> None:
    try:
        _dcp_save(state, tmp, process_group=group)
        _maybe_inject_fault(pending.step)
        _finalize(tmp, pending.final_dir, group)
        logger.info("Saved checkpoint %s (async)", pending.final_dir)
    except Exception as e:  # noqa: BLE001 - surfaced by wait_async_save on the training thread
        pending.error = e


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------


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
    :func:`load_checkpoint`. ``optimizer``, ``lr_scheduler`` and ``dataloader`` may be None (then
    they are not saved, and loading must pass None too). ``model`` may be a list of model parts and
    ``optimizer`` an optimizer container (see the module docstring). With ``async_save`` the
    directory appears when the background write finishes (see the module docstring).
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
    fault_step = _fault_kill_step()  # validate the hook's syntax before writing anything

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
        global _PENDING
        snapshot = _snapshot_to_cpu(state)  # taken now: later in-place updates cannot tear it
        group = _async_group()
        pending = _PendingSave(step=step, final_dir=final, thread=None)  # type: ignore[arg-type]
        pending.thread = threading.Thread(
            target=_async_worker, args=(pending, snapshot, tmp, group), name=f"ckpt-save-{step}"
        )
        _PENDING = pending
        pending.thread.start()
        return final

    _dcp_save(state, tmp)
    if fault_step == step:
        _maybe_inject_fault(step)
    _finalize(tmp, final)
    logger.info("Saved checkpoint %s", final)
    return final


def is_complete_checkpoint(path: str) -> bool:
    """True when ``path`` is a finished checkpoint directory (renamed, with metadata files)."""
    return (
        os.path.isdir(path)
        and _STEP_DIR_RE.match(os.path.basename(os.path.normpath(path))) is not None
        and os.path.isfile(os.path.join(path, EXTRA_STATE_FILE))
        and os.path.isfile(os.path.join(path, DCP_METADATA_FILE))
    )


def latest_checkpoint(output_dir: str) -> str | None:
    """The complete ``step_<N>`` directory with the highest N under ``output_dir`` (None if none).

    Temporary ``.step_<N>.tmp`` directories of interrupted saves never match; a ``step_<N>``
    directory without its metadata files (not written by :func:`save_checkpoint`) is skipped with a
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
    by :func:`purge_old_checkpoints`, which simply leaves them alone).
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


def _field_ref(field: str, legacy_field: str | None, value: Any = None) -> str:
    """``checkpoint.load_path='x' (legacy YAML: train.checkpoint.load_path)``: the setting an
    error tells the user about, on both command lines (without ``='x'`` when ``value`` is None)."""
    text = field if value is None else f"{field}={value!r}"
    return text if not legacy_field else f"{text} (legacy YAML: {legacy_field})"


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
    if _STEP_DIR_RE.match(os.path.basename(os.path.normpath(load_path))) is None:
        found = latest_checkpoint(load_path)
        if found is not None:
            return found
    raise CheckpointError(
        f"{_field_ref(field, legacy_field, load_path)} is not a complete checkpoint (expected "
        f"{EXTRA_STATE_FILE} and {DCP_METADATA_FILE}, or step_<N> subdirectories); it may be from "
        "an interrupted save."
        + _earlier_checkpoint_hint(load_path, field, legacy_field, prefix=" ")
    )


# ---------------------------------------------------------------------------------------------
# damaged checkpoints: which file, and which earlier step to load instead
# ---------------------------------------------------------------------------------------------


class _ShardReadError(Exception):
    """Reading one DCP file failed (raised inside ``dcp.load``; crosses ranks pickled)."""

    def __init__(self, file: str, reason: str) -> None:
        super().__init__(file, reason)
        self.file = file
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


def _reason(exc: BaseException) -> str:
    """``Type: first sentence`` of an error (torch's load errors go on for a paragraph, with
    advice about ``weights_only`` that does not apply to a damaged file)."""
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else ""
    if len(text) > 100 and ". " in text:
        text = text[: text.index(". ") + 1]
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def _dcp_storage_sizes(metadata: Any) -> dict[str, int] | None:
    """``{shard file: bytes the metadata places in it}`` (the end of its last item), or None
    when the metadata is not the file-system layout (then no size check is possible)."""
    storage = getattr(metadata, "storage_data", None)
    if not isinstance(storage, dict):
        return None
    sizes: dict[str, int] = {}
    for info in storage.values():
        rel, offset, length = (getattr(info, a, None) for a in ("relative_path", "offset", "length"))
        if not isinstance(rel, str) or not isinstance(offset, int) or not isinstance(length, int):
            return None
        sizes[rel] = max(sizes.get(rel, 0), offset + length)
    return sizes


def _checkpoint_problem(path: str) -> tuple[str, str] | None:
    """``(file, what is wrong)`` for the first damaged shared file of the complete checkpoint
    ``path`` (None: nothing found). Cheap: ``extra_state.json`` and ``.metadata`` are parsed and
    every shard is checked to exist and to be as long as ``.metadata`` says (no hashing, no
    tensor reads)."""
    try:
        with open(os.path.join(path, EXTRA_STATE_FILE), encoding="utf-8") as f:
            extra = json.load(f)
    except FileNotFoundError:
        return EXTRA_STATE_FILE, "is missing"
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return EXTRA_STATE_FILE, f"cannot be read ({_reason(e)})"
    if not isinstance(extra, dict):
        return EXTRA_STATE_FILE, f"holds a {type(extra).__name__}, not a JSON object"
    return _dcp_problem(path)


def _dcp_problem(path: str) -> tuple[str, str] | None:
    """``(file, what is wrong)`` of ``.metadata`` and the shard files it names, or None."""
    from torch.distributed.checkpoint import FileSystemReader

    if not os.path.isfile(os.path.join(path, DCP_METADATA_FILE)):
        return DCP_METADATA_FILE, "is missing"
    try:
        metadata = FileSystemReader(path).read_metadata()
    except Exception as e:  # noqa: BLE001 - unpickling garbage raises anything
        return DCP_METADATA_FILE, f"cannot be read ({_reason(e)})"
    sizes = _dcp_storage_sizes(metadata)
    if sizes is None:
        return None
    for rel, needed in sorted(sizes.items()):
        file = os.path.join(path, rel)
        try:
            size = os.path.getsize(file)
        except FileNotFoundError:
            return rel, f"is missing ({DCP_METADATA_FILE} places {needed} bytes in it)"
        except OSError as e:
            return rel, f"cannot be read ({_reason(e)})"
        if size < needed:
            return rel, (
                f"is truncated: {size} bytes, but {DCP_METADATA_FILE} places {needed} bytes in it"
            )
    return None


def _earlier_checkpoint_hint(
    path: str, field: str, legacy_field: str | None, *, prefix: str = ""
) -> str:
    """The sentence naming the newest earlier checkpoint of ``path``'s folder that passes
    :func:`_checkpoint_problem` and the setting that loads it ('' for a path that is not a
    ``step_<N>`` directory)."""
    m = _STEP_DIR_RE.match(os.path.basename(os.path.normpath(path)))
    if m is None:
        return ""
    step, folder = int(m.group(1)), os.path.dirname(os.path.normpath(path)) or "."
    ref = _field_ref(field, legacy_field)
    for earlier, candidate in reversed(complete_checkpoints(folder)):
        if earlier < step and _checkpoint_problem(candidate) is None:
            return (
                f"{prefix}The newest earlier complete checkpoint is step {earlier} ({candidate}): "
                f"to resume from it, set {_field_ref(field, legacy_field, candidate)}; with "
                f"{field}='latest' move {os.path.normpath(path)} aside first."
            )
    return (
        f"{prefix}No earlier complete checkpoint under {folder} passes the same checks: restore "
        f"the file, or start from step 0 (unset {ref})."
    )


def _damaged(path: str, file: str, what: str, field: str, legacy_field: str | None) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {path} is damaged: {file} {what}."
        + _earlier_checkpoint_hint(path, field, legacy_field, prefix=" ")
    )


def _agree_on_error(error: CheckpointError | None) -> None:
    """Raise on every rank when any rank found a damaged per-rank file (collective): a rank
    that raised alone would leave the others waiting in the next collective."""
    if not _distributed():
        if error is not None:
            raise error
        return
    messages: list[str | None] = [None] * _world_size()
    dist.all_gather_object(messages, None if error is None else str(error))
    if error is not None:
        raise error
    for rank, message in enumerate(messages):
        if message is not None:
            raise CheckpointError(f"rank {rank} reports: {message}")


def _load_small_file(path: str, name: str, what: str, field: str, legacy_field: str | None) -> Any:
    """``torch.load`` of ``path/name`` (weights only), a CheckpointError naming it otherwise."""
    file = os.path.join(path, name)
    if not os.path.isfile(file):
        raise _damaged(path, name, f"({what}) is missing", field, legacy_field)
    try:
        return torch.load(file, weights_only=True)
    except Exception as e:  # a damaged pickle/zip raises anything
        raise _damaged(
            path, name, f"({what}) cannot be read ({_reason(e)})", field, legacy_field
        ) from e


def _read_extra_state(path: str, field: str, legacy_field: str | None) -> dict[str, Any]:
    problem = _checkpoint_problem(path)  # extra_state.json, .metadata, the shards' sizes
    if problem is not None:
        raise _damaged(path, *problem, field, legacy_field)
    with open(os.path.join(path, EXTRA_STATE_FILE), encoding="utf-8") as f:
        return json.load(f)


def _shard_errors(exc: BaseException) -> list[_ShardReadError]:
    """The :class:`_ShardReadError` s inside a (DCP ``CheckpointException``) error, any rank."""
    found: list[_ShardReadError] = []
    seen: set[int] = set()

    def walk(e: BaseException | None) -> None:
        if e is None or id(e) in seen:
            return
        seen.add(id(e))
        if isinstance(e, _ShardReadError):
            found.append(e)
        failures = getattr(e, "failures", None)
        if isinstance(failures, dict):
            for value in failures.values():
                walk(value[0] if isinstance(value, tuple) and value else value)
        walk(e.__cause__)
        walk(e.__context__)

    walk(exc)
    return found


def _first_failure(exc: BaseException) -> BaseException:
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        value = next(iter(failures.values()))
        inner = value[0] if isinstance(value, tuple) and value else value
        if isinstance(inner, BaseException):
            return inner
    return exc


def load_checkpoint(
    path: str,
    *,
    model: torch.nn.Module | list[torch.nn.Module],
    optimizer: Any | None,
    lr_scheduler,
    dataloader,
    field: str = LOAD_PATH_FIELD,
    legacy_field: str | None = LEGACY_LOAD_PATH_FIELD,
) -> dict[str, Any]:
    """Restore everything :func:`save_checkpoint` wrote into ``path``; return ``extra_state.json``.

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
    before anything is restored.
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
    extra = _read_extra_state(path, field, legacy_field)  # and the DCP files' sizes
    rank, world = _rank(), _world_size()
    saved_world = extra.get("world_size")
    same_world = saved_world == world
    if not same_world and dataloader is not None:
        raise CheckpointError(
            f"{path} was saved with world_size={saved_world}, this run has world_size={world}: the "
            "per-rank data-loader positions (and RNG states) cannot be mapped, so an exact resume is "
            "impossible. Resume with the saved world size, or load weights/optimizer only "
            "(dataloader=None) and restart the data."
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
                path, dataloader_file(rank), f"the data loader state of rank {rank}", field,
                legacy_field,
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


# ---------------------------------------------------------------------------------------------
# HF export
# ---------------------------------------------------------------------------------------------


def _hf_writer() -> Callable[[dict, str, Any], None]:
    """The HF safetensors writer (imported lazily: the model package is heavy and optional here)."""
    from hyper_parallel.models.qwen3_5.hf_io import save_hf_checkpoint

    return save_hf_checkpoint


def _adapter_to_hf(adapter) -> Callable[[dict, Any], dict]:
    """``to_hf`` of an adapter given as an instance, or as a class with a static/class method."""
    import inspect

    if adapter is None:
        raise ValueError(
            "export_hf_weights: the model spec has no state_dict_adapter; HF export needs one"
        )
    if isinstance(adapter, type):
        raw = inspect.getattr_static(adapter, "to_hf", None)
        if raw is None:
            raise TypeError(
                f"state_dict_adapter {adapter.__name__} has no to_hf(state_dict, config)"
            )
        if not isinstance(raw, (staticmethod, classmethod)):
            adapter = adapter()  # instance method on a class: build a default instance
    return adapter.to_hf


def strip_wrapper_infixes(key: str) -> str:
    """Remove activation-checkpoint / torch.compile wrapper infixes from a parameter name."""
    for infix in _WRAPPER_INFIXES:
        key = key.replace(infix, "")
    return key


#: Files of a Hugging Face model directory that describe the tokenizer (copied by the export).
HF_TOKENIZER_ASSETS = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)


def require_hf_assets_dir(assets_dir: str | None) -> None:
    """``hf_assets_path`` is unset or a directory (``ValueError`` naming the fix otherwise)."""
    if assets_dir is not None and not os.path.isdir(assets_dir):
        raise ValueError(
            f"hf_assets_path={assets_dir!r} is not a directory; point it at the model's Hugging "
            "Face assets (config.json, tokenizer.json) or leave it unset"
        )


def _copy_hf_assets(assets_dir: str | None, target: str) -> list[str]:
    """Copy the tokenizer assets found in ``assets_dir`` (``hf_assets_path``) into ``target``,
    so the exported directory is a complete Hugging Face model; returns the copied names."""
    if not assets_dir:
        return []
    require_hf_assets_dir(assets_dir)
    copied = []
    for name in HF_TOKENIZER_ASSETS:
        src = os.path.join(assets_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(target, name))
            copied.append(name)
    return copied


def export_hf_weights(
    model: torch.nn.Module | list[torch.nn.Module], adapter, model_config, path: str
) -> str:
    """Gather the full model state dict and write it as an HF checkpoint into ``path`` (rank 0).

    ``model`` may be a list of model parts; their state dicts are merged by FQN.

    Collective (the gather). Rank 0 converts with ``adapter.to_hf(state_dict, model_config)`` and
    writes through ``hyper_parallel.models.qwen3_5.hf_io.save_hf_checkpoint`` into the hidden
    sibling ``.<name>.tmp`` which is then renamed to ``path`` - so an interrupted export never leaves
    a half-written ``hf_ckpt``. If an async save of the enclosing step is in flight, rank 0 waits
    for it first (the step directory must exist before ``hf_ckpt`` goes into it).
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full: dict[str, torch.Tensor] = {}
    for part in _model_parts(model):
        full.update(
            get_model_state_dict(
                part, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
        )
    if _rank() == 0:
        to_hf = _adapter_to_hf(adapter)
        cleaned: dict[str, torch.Tensor] = {}
        for key, value in full.items():
            name = strip_wrapper_infixes(key)
            if name in cleaned:
                raise CheckpointError(f"export_hf_weights: two parameters map to the name {name!r}")
            cleaned[name] = value
        hf_state = to_hf(cleaned, model_config)
        wait_async_save()
        parent, name = os.path.split(os.path.normpath(path))
        os.makedirs(parent or ".", exist_ok=True)
        tmp = os.path.join(parent, f".{name}.tmp")
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
        _hf_writer()(hf_state, tmp, model_config)
        _copy_hf_assets(getattr(adapter, "hf_assets_path", None), tmp)
        _replace_dir(tmp, path)
        logger.info("Exported HF weights to %s", path)
    _barrier()
    return path
