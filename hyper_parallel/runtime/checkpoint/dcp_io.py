"""Model and optimizer state through torch.distributed.checkpoint (DCP).

The DCP files hold ``{"model": ..., "optimizer": ...}`` from ``get_state_dict`` (FQN keys,
DTensor shards for FSDP2/TP, so a different mesh can load it).

**Model parts and optimizer containers.** ``model`` may be one module or a list of model parts
(their state dicts are merged by FQN). ``optimizer`` may be a ``torch.optim.Optimizer`` (saved with
``get_state_dict(model, optimizer)``, the legacy layout) or a container such as
:class:`hyper_parallel.components.optimizer.OptimizersContainer`: any object that is not a torch
optimizer and provides ``state`` (empty before the first step), ``state_dict()`` (its DCP state) and
``load_state_dict(state)``.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from typing import Any

import torch

from .errors import _reason, _ShardReadError
from .ranks import _alone


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
        dcp.save(state, checkpoint_id=path, process_group=process_group,
                 no_dist=_alone(process_group))


def _dcp_load(state: dict[str, Any], path: str) -> None:
    import torch.distributed.checkpoint as dcp

    with _quiet_single_process():
        dcp.load(
            state,
            checkpoint_id=path,
            storage_reader=_attributing_reader(path),
            no_dist=_alone(),
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
