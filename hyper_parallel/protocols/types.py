"""Names shared by the protocol layer and the components, free of any framework import.

``MeshAxisName`` spells the device-mesh axes of :class:`hyper_parallel.runtime.parallel_dims.
ParallelDims`: its base dims (``BASE_DIM_ORDER``) and the flattened aliases registered on the root
mesh (``ParallelDims.alias_dims``). Being a ``StrEnum``, a member *is* its string, so
``parallel_dims.get_mesh(MeshAxisName.TP)`` and ``get_mesh("tp")`` are the same call; a test keeps
the literals equal to ``ParallelDims``' names.
"""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10 (the project supports >= 3.10): the same semantics, spelled out.

    class StrEnum(str, enum.Enum):
        """A ``str`` whose ``str()`` and ``format()`` are its value."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str.__format__(str(self.value), spec)


class MeshAxisName(StrEnum):
    """Axes of the device mesh: six base dims and five flattened aliases."""

    DP_REPLICATE = "dp_replicate"
    """Replicated data parallelism (the outer dim of HSDP)."""
    DP_SHARD = "dp_shard"
    """Sharded data parallelism (FSDP)."""
    EP = "ep"
    """Expert parallelism (its own axis here, counted in the world size)."""
    CP = "cp"
    """Context (sequence) parallelism."""
    TP = "tp"
    """Tensor parallelism."""
    PP = "pp"
    """Pipeline parallelism."""

    FSDP = "fsdp"
    """Alias of ``dp_shard`` (present only when ``dp_shard`` is a mesh dim)."""
    DP = "dp"
    """Alias of ``(dp_replicate, dp_shard)``, whichever exist: the data-loading ranks."""
    LOSS = "loss"
    """Alias of the ``dp`` dims plus ``ep`` and ``cp``: the ranks over which tokens are
    counted."""
    DP_SHARD_EP = "dp_shard_ep"
    """Alias of ``(dp_shard, ep)``: what FSDP shards dense parameters over under expert
    parallelism."""
    DP_SHARD_CP = "dp_shard_cp"
    """Alias of ``(dp_shard, cp)``: what FSDP shards parameters over under context
    parallelism."""


BASE_MESH_AXES: tuple[MeshAxisName, ...] = (
    MeshAxisName.DP_REPLICATE,
    MeshAxisName.DP_SHARD,
    MeshAxisName.EP,
    MeshAxisName.CP,
    MeshAxisName.TP,
    MeshAxisName.PP,
)
"""The base mesh dims in canonical (outer to inner) order."""

FLATTENED_MESH_AXES: tuple[MeshAxisName, ...] = (
    MeshAxisName.FSDP,
    MeshAxisName.DP,
    MeshAxisName.LOSS,
    MeshAxisName.DP_SHARD_EP,
    MeshAxisName.DP_SHARD_CP,
)
"""The aliases flattened from base dims on the root mesh."""


__all__ = ["BASE_MESH_AXES", "FLATTENED_MESH_AXES", "MeshAxisName", "StrEnum"]
