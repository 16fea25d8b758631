"""Tensors a process group's backend serves: the one home of "which device does a collective
take its tensors on".

``torch.distributed`` maps backends to device types: NCCL serves CUDA tensors only, gloo serves
CPU tensors (and CUDA ones in a CUDA build). A CPU tensor handed to an NCCL group fails with
"No backend type associated with device type cpu" -- on the first multi-GPU step, never on a
CPU test machine. So no code of the trainer calls a tensor collective on a tensor it made
itself without going through here: :func:`comm_tensor` makes one on the group's device,
:func:`on_comm_device` moves one there, and :func:`all_reduce` / :func:`barrier` do both.
Collectives on tensors that already live where the model computes (the experts' and the
context-parallel all-to-alls, FSDP's own) need nothing: the model's device is one the backend
serves. Object collectives (``all_gather_object`` ...) choose their device inside torch.

The device is read off the group (``ProcessGroup._device_types``, what its backends were
registered for), so a ``"cpu:gloo,cuda:nccl"`` group keeps small host values on the host, and
the CPU check of ``tests/torch/st/qwen3_5/test_gpu_collectives.py`` -- a fake process
group registered for ``cuda`` alone -- refuses any tensor that skipped this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist


def _group_or_world(group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    return group if group is not None else dist.group.WORLD


def _served_device_types(group: dist.ProcessGroup | None) -> list[str]:
    devices = getattr(_group_or_world(group), "_device_types", None) or []
    return [torch.device(d).type for d in devices]


def comm_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """The device a tensor collective over ``group`` (the world by default) takes.

    The host when the group's backend serves it (gloo: cheapest for the step's few scalars),
    else the current CUDA device (NCCL; ``torch.cuda.set_device`` ran at set-up); the host when
    no group is initialized (nothing is communicated)."""
    if not (dist.is_available() and dist.is_initialized()):
        return torch.device("cpu")
    served = _served_device_types(group)
    if not served or "cpu" in served:
        return torch.device("cpu")
    if "cuda" in served:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(served[0])


def comm_tensor(
    data: Any, *, dtype: torch.dtype, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """``torch.tensor(data, dtype=dtype)`` on the device ``group``'s backend serves."""
    return torch.tensor(data, dtype=dtype, device=comm_device(group))


def on_comm_device(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``tensor`` itself when ``group``'s backend serves its device, else a copy on a device it
    serves (the caller reduces the copy and reads the result from it)."""
    served = _served_device_types(group) if dist.is_available() and dist.is_initialized() else []
    if not served or tensor.device.type in served:
        return tensor
    return tensor.to(comm_device(group))


def _active(group: dist.ProcessGroup | None) -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def all_reduce(
    tensor: torch.Tensor,
    group: dist.ProcessGroup | None,
    op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
) -> torch.Tensor:
    """Reduce ``tensor`` over ``group`` and return the result (no-op without a group or on a
    group of one). The result is ``tensor`` itself, reduced in place, when the backend serves
    its device, else a reduced copy on a device it does -- use the return value."""
    if group is None or not _active(group):
        return tensor
    served = on_comm_device(tensor, group)
    dist.all_reduce(served, op=op, group=group)
    return served


def all_reduce_sum(tensor: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """:func:`all_reduce` with ``SUM``."""
    return all_reduce(tensor, group, dist.ReduceOp.SUM)


def sum_counts(counts: Sequence[int], group: dist.ProcessGroup | None) -> list[int]:
    """Integer counts summed element-wise over ``group`` (one all-reduce), as Python ints."""
    if group is None or not _active(group):
        return [int(c) for c in counts]
    return all_reduce_sum(comm_tensor(list(counts), dtype=torch.int64, group=group), group).tolist()


def barrier(group: dist.ProcessGroup | None = None) -> None:
    """``dist.barrier`` over ``group`` (no-op without a process group), on the device its
    backend serves: NCCL is told the current device instead of guessing one from the rank."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    device = comm_device(group)
    if device.type == "cuda":
        dist.barrier(group=group, device_ids=[device.index])
    else:
        dist.barrier(group=group)


__all__ = [
    "all_reduce",
    "all_reduce_sum",
    "barrier",
    "comm_device",
    "comm_tensor",
    "on_comm_device",
    "sum_counts",
]
