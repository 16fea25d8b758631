"""The work of a rank role's step, as the planner prices it, and where its groups sit.

:class:`Collective` and :class:`RoleWork` are preflight's (it records them from its simulated
step with ``work=True``: :mod:`hyper_parallel.preflight.work`); this module is their home for
the planner's readers and adds the cluster's side: which node a rank sits on and whether a
group crosses nodes.

Rank placement is torchrun's: global rank ``r`` runs on node ``r // gpus_per_node``.
"""

from __future__ import annotations

from hyper_parallel.preflight.work import (
    FSDP_AXES,
    KINDS,
    PHASES,
    Collective,
    RoleWork,
    chunk_step_work,
    extrapolate,
    merge,
)


def node_of(rank: int, gpus_per_node: int) -> int:
    """The node global rank ``rank`` runs on (torchrun fills a node's local ranks first)."""
    return rank // gpus_per_node


def nodes_spanned(group_ranks: tuple[int, ...], gpus_per_node: int) -> int:
    """How many nodes a group's ranks sit on."""
    return len({node_of(r, gpus_per_node) for r in group_ranks})


def crosses_nodes(group_ranks: tuple[int, ...], gpus_per_node: int) -> bool:
    """Whether a collective on ``group_ranks`` has to use the network between nodes."""
    return nodes_spanned(group_ranks, gpus_per_node) > 1


__all__ = ["FSDP_AXES", "KINDS", "PHASES", "Collective", "RoleWork", "chunk_step_work",
           "crosses_nodes", "extrapolate", "merge", "node_of", "nodes_spanned"]
