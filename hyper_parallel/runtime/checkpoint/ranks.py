"""This process's rank and world, with or without an initialized process group.

Checkpointing works in a single process without ``torch.distributed`` set up: then the rank
is 0, the world is 1 and barriers are no-ops.
"""

from __future__ import annotations

import torch.distributed as dist

from hyper_parallel.platform.collectives import barrier


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def _rank() -> int:
    return dist.get_rank() if _distributed() else 0


def _world_size() -> int:
    return dist.get_world_size() if _distributed() else 1


def _alone(group=None) -> bool:
    """Whether ``group`` (the world by default) is this process alone: DCP then plans and
    writes without collectives (``no_dist``) -- on one rank its gathers of pickled plans only
    cost time."""
    return not _distributed() or dist.get_world_size(group) == 1


def _barrier(group=None) -> None:
    barrier(group)
