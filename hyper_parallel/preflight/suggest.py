"""What would make a rank role fit, each change checked by preflighting it.

The changes keep the job's world size and its global batch, and go from the one that costs
least to the one that costs most: reduce-scatter every micro-batch instead of holding FSDP's
unsharded gradients across them (when ``parallelism.fsdp_defer_gradient_sync`` is on: more
collectives, no recomputation), recompute more (activation checkpointing off -> selective ->
full), a smaller local batch (more gradient-accumulation steps), then move a factor of two of
FSDP into expert parallelism (mixture-of-experts models) or tensor parallelism. More
accumulation is no memory fix while the unsharded gradients are held (they do not shrink
with the micro-batch): such a suggestion fits only with them counted, and says what they
cost. A change the
configuration's own rules refuse (2 key/value heads over 4 tensor-parallel ranks) is not
suggested. Pipeline parallelism is not tried: a new stage cut is a layout decision the user
makes (preflight it with ``--parallelism.pipeline_parallel_degree``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

from hyper_parallel.preflight.report import deferred_cost
from hyper_parallel.preflight.simulate import resolved_model_config
from hyper_parallel.utils.errors import ConfigError

Change = tuple[str, Callable[[Any], None]]


def _copy(config: Any) -> Any:
    spec = config.model_spec
    return copy.deepcopy(config, {id(spec): spec} if spec is not None else None)


def candidates(config: Any) -> Iterator[Change]:
    """The changes worth trying for ``config``, cheapest first: ``(flags, apply)``."""
    if config.parallelism.fsdp_defer_gradient_sync:
        yield ("--parallelism.fsdp_defer_gradient_sync=false",
               lambda c: setattr(c.parallelism, "fsdp_defer_gradient_sync", False))
    ac = config.activation_checkpoint.mode
    if ac in ("off", "none"):
        yield ("--activation_checkpoint.mode=selective",
               lambda c: setattr(c.activation_checkpoint, "mode", "selective"))
    if ac != "full":
        yield ("--activation_checkpoint.mode=full",
               lambda c: setattr(c.activation_checkpoint, "mode", "full"))
    t = config.training
    local = t.local_batch_size
    while local > 1 and local % 2 == 0:
        local //= 2

        def smaller(c: Any, n: int = local) -> None:
            c.training.local_batch_size = n

        yield f"--training.local_batch_size={local}", smaller
    p = config.parallelism
    shard = p.data_parallel_shard_degree or 1
    if shard >= 2 and shard % 2 == 0:
        # The model the run builds (a legacy YAML names its spec by ``model.name``: no
        # ``model_spec`` of its own).
        axes = ["expert_parallel_degree"] if getattr(resolved_model_config(config),
                                                     "num_experts", 0) else []
        for axis in [*axes, "tensor_parallel_degree"]:
            degree = getattr(p, axis) * 2

            def from_fsdp(c: Any, axis: str = axis, degree: int = degree) -> None:
                setattr(c.parallelism, axis, degree)
                c.parallelism.data_parallel_shard_degree = shard // 2

            yield ((f"--parallelism.{axis}={degree} "
                   f"--parallelism.data_parallel_shard_degree={shard // 2}"), from_fsdp)


def suggest(config: Any, check: Callable[[Any], Any], limit: int = 2) -> list[str]:
    """Up to ``limit`` changes after which ``check(changed config)`` (a preflight) fits, each
    as ``"flags: the figure"``; every problem a change meets is skipped."""
    found: list[str] = []
    for flags, apply in candidates(config):
        changed = _copy(config)
        apply(changed)
        try:
            result = check(changed)
        except ConfigError:
            continue
        if result.fits:
            worst = max(result.roles, key=lambda r: r.total_bytes)
            found.append(f"{flags}: {worst.total_bytes / 2**30:.1f} GiB, {worst.verdict}"
                         f"{deferred_cost(worst)}")
            if len(found) >= limit:
                break
    return found


__all__ = ["candidates", "suggest"]
