"""The pipeline stages' full state dicts merged on one rank (tests compare layouts with it).

Not for exporting weights: it pickles every tensor of a stage through ``gather_object``, so the
first rank holds the whole model. The Hugging Face export streams instead (:mod:`.hf_export`).
"""

from __future__ import annotations

from typing import Any

import torch


def gather_stage_states(state: dict[str, torch.Tensor], group: Any) -> dict[str, torch.Tensor]:
    """The stages' full state dicts merged on the first rank of ``group`` (the pipeline ranks;
    empty elsewhere). Collective over ``group``."""
    import torch.distributed as dist

    local = {k: v.detach().cpu() for k, v in state.items()}
    first = dist.get_group_rank(group, dist.get_rank()) == 0
    gathered: list[Any] | None = [None] * dist.get_world_size(group) if first else None
    dist.gather_object(local, gathered, group=group, group_dst=0)
    merged: dict[str, torch.Tensor] = {}
    for stage_state in gathered or []:
        merged.update(stage_state)
    return merged


__all__ = ["gather_stage_states"]
