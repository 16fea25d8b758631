"""How many ranks a recipe needs, and the nodes that give them.

A recipe knows its world size: the product of its parallel degrees (expert parallelism is an
axis of its own here, see :mod:`hyper_parallel.runtime.parallel_dims`), or any multiple of the
product of the others when ``data_parallel_shard_degree`` is ``-1``. :func:`fit` holds that
against ``nodes x gpus_per_node`` and returns the cluster to launch on; a mismatch is a
:class:`ConfigError` naming the degrees, what the nodes give, and the node counts that would fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyper_parallel.runtime.parallel_dims import (
    PARALLELISM_FIELDS,
    ParallelDims,
    parallelism_degrees,
)
from hyper_parallel.utils.errors import ConfigError

#: The degrees in the order the messages name them.
_ORDER = ("dp_replicate", "dp_shard", "cp", "tp", "pp", "ep")


@dataclass(frozen=True)
class Cluster:
    """The nodes a job runs on: ``nodes`` machines of ``gpus_per_node`` ranks each."""

    nodes: int
    gpus_per_node: int

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node


def degrees(parallelism: Any) -> dict[str, int]:
    """The degrees that multiply to the world size, by ``ParallelDims`` name (the expert tensor
    degree is not an axis of the mesh: it divides the tensor-parallel ranks)."""
    values = parallelism_degrees(parallelism)
    return {name: values[name] for name in _ORDER}


def describe(values: dict[str, int]) -> str:
    """``parallelism.data_parallel_shard_degree 8 x parallelism.expert_parallel_degree 16 = 128
    ranks`` (degrees above 1, by their full names, which a legacy entry translates to its keys;
    an inferred FSDP degree is left out)."""
    shown = [(n, v) for n, v in values.items() if v > 1]
    product = 1
    for _, value in shown:
        product *= value
    if not shown:
        return "every degree is 1: 1 rank"
    return " x ".join(f"{PARALLELISM_FIELDS[n]} {v}" for n, v in shown) + f" = {product} rank" + (
        "s" if product > 1 else "")


def _fitting(world: int, gpus_per_node: int) -> str:
    """The node shapes that give exactly ``world`` ranks, for the error's fix."""
    if world % gpus_per_node == 0:
        nodes = world // gpus_per_node
        return (f"{nodes} node{'s' if nodes > 1 else ''} x {gpus_per_node} GPUs gives {world}; "
                f"pass --nodes {nodes}")
    per_node = [g for g in range(min(gpus_per_node, world), 0, -1) if world % g == 0][:2]
    shapes = " or ".join(f"--nodes {world // g} --gpus-per-node {g}" for g in per_node)
    return (f"{world} is not a multiple of {gpus_per_node} GPUs a node; run fewer ranks a node "
            f"({shapes}) or change the degrees")


def fit(parallelism: Any, nodes: int | None, gpus_per_node: int) -> tuple[Cluster, int | None]:
    """The cluster a recipe with ``parallelism`` runs on with ``gpus_per_node`` ranks a node, and
    the FSDP degree resolved from ``-1`` (None when it is not inferred). ``nodes`` None: the
    nodes the degrees need. The layout's other rules (``ParallelDims``) are checked at the
    resulting world size, so a job that could not build its mesh is refused here."""
    if gpus_per_node < 1:
        raise ConfigError(f"{gpus_per_node} is not a GPU count; give the ranks to start on each "
                          "node (its GPUs)", path="--gpus-per-node")
    if nodes is not None and nodes < 1:
        raise ConfigError(f"{nodes} is not a node count", path="--nodes")
    values = degrees(parallelism)
    inferred = values["dp_shard"] == -1
    if inferred:
        values["dp_shard"] = 1
    needed = 1
    for name in _ORDER:
        needed *= max(values[name], 1)
    shard_field = PARALLELISM_FIELDS["dp_shard"]
    if nodes is None:
        if inferred:
            raise ConfigError(
                f"{shard_field} is -1 (every rank the other degrees leave), so the job's size "
                f"is yours to choose: pass --nodes (each node adds {gpus_per_node} ranks; "
                f"{describe(values)} must divide the total)", path="--nodes")
        if needed % gpus_per_node:
            raise ConfigError(f"{describe(values)}; {_fitting(needed, gpus_per_node)}",
                              path="--nodes")
        nodes = needed // gpus_per_node
    cluster = Cluster(nodes, gpus_per_node)
    given = (f"--nodes {nodes} x --gpus-per-node {gpus_per_node} gives {cluster.world} "
             f"rank{'s' if cluster.world > 1 else ''}")
    resolved = None
    if inferred:
        if cluster.world % needed:
            raise ConfigError(
                f"-1 takes the ranks the other degrees leave, but {given}, not a multiple of "
                f"{describe(values)}; give a node count whose ranks it divides",
                path=shard_field)
        resolved = cluster.world // needed
    elif needed != cluster.world:
        raise ConfigError(f"{describe(values)}, but {given}; {_fitting(needed, gpus_per_node)}",
                          path="--nodes")
    ParallelDims.from_parallelism(parallelism, cluster.world)
    return cluster, resolved


__all__ = ["Cluster", "degrees", "describe", "fit"]
