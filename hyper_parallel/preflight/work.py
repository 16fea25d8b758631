"""The work of one rank role's optimizer step: FLOPs, memory-bound bytes, every collective.

Recorded from preflight's own simulated step when asked (``work=True``): the same operators
the rank's engine runs, on the same fake tensors, so a layout's work is the engine's, not a
formula of an imagined model. The types live here, below the planner (which re-exports them
from :mod:`hyper_parallel.plan.work`), because preflight builds them and must never import
the planner.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

#: The collective kinds a step can issue (nccl-tests' names).
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send_recv", "broadcast")
#: What a collective can overlap with: the phase of the step that issues it ("" = the step's
#: own bookkeeping, e.g. the token-count all-reduce, on the critical path).
PHASES = ("forward", "backward", "optimizer", "")


@dataclass(frozen=True)
class Collective:
    """One kind of collective call of a step on one process group, and how many of it."""

    kind: str
    """``all_gather`` | ``reduce_scatter`` | ``all_reduce`` | ``all_to_all`` | ``send_recv`` |
    ``broadcast``."""
    bytes: int
    """The full array size S as nccl-tests defines it, per call: an all-gather's output, a
    reduce-scatter's input, an all-reduce's buffer, an all-to-all's send buffer, a send's
    payload."""
    group_ranks: tuple[int, ...]
    """The global ranks of the process group it ran on (a send: this rank and its peer)."""
    count: int = 1
    """How many identical calls the step issues."""
    phase: str = ""
    """``forward`` | ``backward`` | ``optimizer`` | ``""`` -- what it can overlap with."""
    axis: str = ""
    """The mesh dimension the group is (``dp_shard_cp``, ``tp``, ``ep``, ``cp``, ``pp``,
    ``dp_replicate``, ...; ``""`` when it is none of the mesh's): who issued it, hence what the
    engine overlaps it with."""

    @property
    def key(self) -> tuple:
        return (self.kind, self.bytes, self.group_ranks, self.phase, self.axis)


@dataclass
class RoleWork:
    """What one rank of a role does in one optimizer step (all micro-batches)."""

    flops: dict[str, float] = field(default_factory=dict)
    """By operator class (``matmul``, ``attention``, ``other``), as torch's FLOP counter
    counts them."""
    memory_bytes: float = 0.0
    """Bytes read and written by the memory-bound operators (everything but the matmuls and
    attention kernels, views excluded)."""
    collectives: list[Collective] = field(default_factory=list)
    """Every collective the step issues, one entry per :attr:`Collective.key`."""
    phase_flops: dict[str, float] = field(default_factory=dict)
    """The FLOPs again, by the phase of the step that runs them (:data:`PHASES`): what each
    phase's collectives can hide behind."""
    phase_memory_bytes: dict[str, float] = field(default_factory=dict)
    """The memory-bound bytes by phase."""
    micro_batches: int = 1
    """The micro-batches of the step (gradient accumulation, or a pipeline's)."""

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    def combined(self, other: RoleWork, factor: float = 1.0) -> RoleWork:
        """``self + factor x other`` (a collective count that would not be whole or would
        fall below zero is an error: the two were not alike)."""
        counts: dict[tuple, float] = collections.OrderedDict(
            (c.key, float(c.count)) for c in self.collectives)
        for c in other.collectives:
            counts[c.key] = counts.get(c.key, 0.0) + factor * c.count
        collectives = []
        for key, n in counts.items():
            if n < -1e-9 or abs(n - round(n)) > 1e-9:
                raise ValueError(
                    f"{n:g} {key[0]} calls of {key[1]} bytes on {key[2]}: not a whole count "
                    "(the works combined were not alike)")
            if round(n):
                collectives.append(Collective(*key[:3], round(n), *key[3:]))
        return RoleWork(_plus(self.flops, other.flops, factor),
                        self.memory_bytes + factor * other.memory_bytes, collectives,
                        _plus(self.phase_flops, other.phase_flops, factor),
                        _plus(self.phase_memory_bytes, other.phase_memory_bytes, factor),
                        self.micro_batches)

    def scaled(self, factor: float) -> RoleWork:
        """This work ``factor`` times (a micro-batch repeated)."""
        return RoleWork(micro_batches=self.micro_batches).combined(self, factor)

    def __add__(self, other: RoleWork) -> RoleWork:
        return self.combined(other)

    def __sub__(self, other: RoleWork) -> RoleWork:
        return self.combined(other, -1.0)


def _plus(a: dict[str, float], b: dict[str, float], factor: float) -> dict[str, float]:
    return {k: a.get(k, 0.0) + factor * b.get(k, 0.0) for k in {**a, **b}}


def merge(collectives: list[Collective]) -> list[Collective]:
    """Identical collectives (same :attr:`~Collective.key`) summed into one entry, in first
    appearance order."""
    return RoleWork().combined(RoleWork(collectives=list(collectives))).collectives


def extrapolate(one: RoleWork, two: RoleWork, periods: int) -> RoleWork:
    """The work of a model ``periods`` layer periods deep from its work one and two periods
    deep: ``one + (two - one) x (periods - 1)``, exact when every period does the same (the
    depth extrapolation of preflight's memory, :mod:`~.simulate`). A collective whose count
    would fall below zero means the periods were not alike: an error, not a guess."""
    try:
        return one.combined(two.combined(one, -1.0), periods - 1)
    except ValueError as exc:
        raise RuntimeError(f"preflight: the work does not repeat every layer period ({exc}); "
                           "this model's work needs a whole-depth step") from None


__all__ = ["KINDS", "PHASES", "Collective", "RoleWork", "extrapolate", "merge"]
