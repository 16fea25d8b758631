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

**Which ranks.** The reductions (:func:`all_reduce`, :func:`all_reduce_sum`, :func:`sum_counts`,
:func:`gather_ints`) take the group explicitly: a process group (``dist.group.WORLD`` for every
rank) or :data:`ALONE` (nothing to reduce: this rank's value is the result). ``None`` is refused
with a ``TypeError`` on every machine, one rank included: it once meant "no group" here while it
means "the default group" to torch and to :func:`comm_tensor`, and the stop signal's all-reduce
over ``None`` silently reduced nothing -- every rank stopped on its own signal and the job hung
in mismatched collectives. A layout's optional group (``dp_group``: None when the job has no
data parallelism) says so at the call: :func:`or_alone`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist


class _Alone:
    """The type of :data:`ALONE`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ALONE"


#: The group of a reduction with no other rank: the result is this rank's own value (and a
#: tensor made for it stays on the host).
ALONE = _Alone()

#: What the reductions take: a process group, or :data:`ALONE`.
Group = dist.ProcessGroup | _Alone


def or_alone(group: dist.ProcessGroup | None) -> Group:
    """A layout's optional group as a reduction's: ``group``, or :data:`ALONE` when it is None
    (``DistributedContext.dp_group`` / ``split_group`` are None when the job has no such axis,
    and then every rank already holds the whole value)."""
    return ALONE if group is None else group


def _reduction_group(group: Group | None) -> dist.ProcessGroup | None:
    """The process group a reduction runs over (None: it has nothing to reduce)."""
    if group is None:
        raise TypeError(
            "a reduction's group is required: pass dist.group.WORLD to reduce over every rank, "
            "a process group, or ALONE (or_alone(optional_group)) for this rank's value alone; "
            "None is ambiguous (torch reads it as the default group)"
        )
    return None if group is ALONE else group


def _group_or_world(group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    return group if group is not None else dist.group.WORLD


def _served_device_types(group: Group | None) -> list[str]:
    if group is ALONE:
        return []  # nothing is communicated: the host
    devices = getattr(_group_or_world(group), "_device_types", None) or []
    return [torch.device(d).type for d in devices]


def comm_device(group: Group | None = None) -> torch.device:
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
    data: Any, *, dtype: torch.dtype, group: Group | None = None
) -> torch.Tensor:
    """``torch.tensor(data, dtype=dtype)`` on the device ``group``'s backend serves."""
    return torch.tensor(data, dtype=dtype, device=comm_device(group))


def on_comm_device(tensor: torch.Tensor, group: Group | None = None) -> torch.Tensor:
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
    group: Group,
    op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
) -> torch.Tensor:
    """Reduce ``tensor`` over ``group`` (``dist.group.WORLD``: every rank) and return the result
    (no-op for :data:`ALONE`, without a process group, or on a group of one; ``None`` is a
    ``TypeError``). The result is ``tensor`` itself, reduced in place, when the backend serves
    its device, else a reduced copy on a device it does -- use the return value."""
    pg = _reduction_group(group)
    if pg is None or not _active(pg):
        return tensor
    served = on_comm_device(tensor, pg)
    dist.all_reduce(served, op=op, group=pg)
    return served


def all_reduce_sum(tensor: torch.Tensor, group: Group) -> torch.Tensor:
    """:func:`all_reduce` with ``SUM``."""
    return all_reduce(tensor, group, dist.ReduceOp.SUM)


def sum_counts(counts: Sequence[int], group: Group) -> list[int]:
    """Integer counts summed element-wise over ``group`` (one all-reduce), as Python ints."""
    pg = _reduction_group(group)
    if pg is None or not _active(pg):
        return [int(c) for c in counts]
    return all_reduce_sum(comm_tensor(list(counts), dtype=torch.int64, group=pg), pg).tolist()


def gather_ints(values: Sequence[int], group: Group) -> list[list[int]]:
    """Every rank's ``values`` (as many on each rank) in ``group``'s rank order, as Python ints:
    one all-gather of a small tensor, read back once (a job of 512 ranks gathers 512 rows)."""
    pg = _reduction_group(group)
    if pg is None or not _active(pg):
        return [[int(v) for v in values]]
    mine = comm_tensor(list(values), dtype=torch.int64, group=pg)
    # The concatenated form: gloo refuses the stacked one.
    rows = torch.empty(dist.get_world_size(pg) * mine.numel(), dtype=mine.dtype,
                       device=mine.device)
    dist.all_gather_single(rows, mine, group=pg)
    return rows.view(-1, mine.numel()).tolist()


def barrier(group: Group | None = None) -> None:
    """``dist.barrier`` over ``group`` (the world by default; no-op for :data:`ALONE` or without
    a process group), on the device its backend serves: NCCL is told the current device
    instead of guessing one from the rank."""
    if group is ALONE or not (dist.is_available() and dist.is_initialized()):
        return
    device = comm_device(group)
    if device.type == "cuda":
        dist.barrier(group=group, device_ids=[device.index])
    else:
        dist.barrier(group=group)


__all__ = [
    "ALONE",
    "Group",
    "all_reduce",
    "all_reduce_sum",
    "barrier",
    "comm_device",
    "comm_tensor",
    "gather_ints",
    "on_comm_device",
    "or_alone",
    "sum_counts",
]
